"""The pull API is guarded as a gRPC consumer is: leasing and settling need the
consume grant on the topic, and a lease token settles only for the principal
it was issued to. A refusal changes nothing."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.broker.http.conftest import Api, Serve
from tests.security.support import TOKENS, standard_policy, write_policy


def _bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


@pytest.fixture
def auth(tmp_path: Path) -> str:
    return str(write_policy(tmp_path / "auth.yaml", standard_policy()))


async def _due_message(api: Api, topic: str) -> None:
    made = await api.call("POST", "/v1/topics", {"name": topic}, headers=_bearer("admin"))
    assert made.status == 201, made.body
    message = {"id": "m", "timestamp_ms": int(time.time() * 1000)}
    sent = await api.call("POST", f"/v1/topics/{topic}/messages", message, headers=_bearer("admin"))
    assert sent.status == 201


async def _leased(api: Api, topic: str) -> int:
    shown = await api.call("GET", f"/v1/topics/{topic}", headers=_bearer("admin"))
    return int(shown.body["counts"].get("leased", 0))


async def test_a_principal_without_consume_is_refused_a_lease(serve: Serve, auth: str) -> None:
    # given a due message on t-a
    api = await serve(auth=auth)
    await _due_message(api, "t-a")
    # when principals without the consume grant ask to lease it
    for name in ("producer", "describer"):
        refused = await api.call(
            "POST", "/v1/topics/t-a/lease", {"wait_ms": 0}, headers=_bearer(name)
        )
        # then they are refused, and the message stays unleased
        assert (refused.status, refused.body["code"]) == (403, "PERMISSION_DENIED"), name
    anonymous = await api.call("POST", "/v1/topics/t-a/lease", {})
    assert anonymous.status == 401
    assert await _leased(api, "t-a") == 0


async def test_a_token_settles_only_for_its_principal_with_consume(serve: Serve, auth: str) -> None:
    # given a message alice leased
    api = await serve(auth=auth)
    await _due_message(api, "t-a")
    got = await api.call(
        "POST", "/v1/topics/t-a/lease", {"wait_ms": 5000}, headers=_bearer("alice")
    )
    assert got.status == 200, got.body
    (delivery,) = got.body["deliveries"]
    tokens = {"lease_tokens": [delivery["lease_token"]]}
    # when the producer acks with it: refused for want of consume
    denied = await api.call("POST", "/v1/topics/t-a/ack", tokens, headers=_bearer("producer"))
    assert (denied.status, denied.body["code"]) == (403, "PERMISSION_DENIED")
    # when bob, who may consume, acks with alice's token: refused, not applied
    bobs = await api.call("POST", "/v1/topics/t-a/ack", tokens, headers=_bearer("bob"))
    assert bobs.status == 200
    assert [r["ok"] for r in bobs.body["results"]] == [False]
    assert await _leased(api, "t-a") == 1
    # then alice's own ack applies
    hers = await api.call("POST", "/v1/topics/t-a/ack", tokens, headers=_bearer("alice"))
    assert [r["ok"] for r in hers.body["results"]] == [True]
    assert await _leased(api, "t-a") == 0
