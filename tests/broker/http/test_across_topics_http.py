"""``GET /v1/bridges`` and ``GET /v1/outboxes``: what a broker runs across
topics (a bridge's ends, an outbox's rows), to a caller granted on every topic
only."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.broker.http.conftest import Serve
from tests.security.support import TOKENS, standard_policy, write_policy


@pytest.mark.parametrize("listing", ["bridges", "outboxes"])
async def test_only_a_caller_granted_on_every_topic_sees_the_list(
    serve: Serve, tmp_path: Path, listing: str
) -> None:
    # Given a broker with --auth running no bridge and relaying no outbox
    auth = str(write_policy(tmp_path / "auth.yaml", standard_policy()))
    api = await serve(auth=auth)
    # When an admin of every topic asks, then the list is answered (empty)
    admin = await api.call(
        "GET", f"/v1/{listing}", headers={"Authorization": f"Bearer {TOKENS['admin']}"}
    )
    assert (admin.status, admin.body) == (200, {listing: []})
    # And a principal granted on some topics only is refused
    alice = await api.call(
        "GET", f"/v1/{listing}", headers={"Authorization": f"Bearer {TOKENS['alice']}"}
    )
    assert alice.status == 403
    assert "describe" in alice.body["detail"] and "'*'" in alice.body["detail"]
