"""``GET /v1/bridges``: the bridges a broker runs, to a caller granted on every
topic only (a bridge's ends span topics)."""

from __future__ import annotations

from pathlib import Path

from tests.broker.http.conftest import Serve
from tests.security.support import TOKENS, standard_policy, write_policy


async def test_only_a_caller_granted_on_every_topic_sees_the_bridges(
    serve: Serve, tmp_path: Path
) -> None:
    # Given a broker with --auth running no bridge
    auth = str(write_policy(tmp_path / "auth.yaml", standard_policy()))
    api = await serve(auth=auth)
    # When an admin of every topic asks, then the list is answered (empty)
    admin = await api.call(
        "GET", "/v1/bridges", headers={"Authorization": f"Bearer {TOKENS['admin']}"}
    )
    assert (admin.status, admin.body) == (200, {"bridges": []})
    # And a principal granted on some topics only is refused
    alice = await api.call(
        "GET", "/v1/bridges", headers={"Authorization": f"Bearer {TOKENS['alice']}"}
    )
    assert alice.status == 403
    assert "describe" in alice.body["detail"] and "'*'" in alice.body["detail"]
