"""SIGHUP reloads the auth file: new grants and principals apply to the next
call; a file that does not load keeps the old policy, and the log says why."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from dejaq.core.errors import PermissionDenied, Unauthenticated
from dejaq.driver.admin import Admin
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import create_topic, wait_until
from tests.security.support import TOKENS, client, sha256, write_policy


def _policy(alice_allows: list[str], with_bob: bool = False) -> dict[str, object]:
    principals: dict[str, object] = {
        "admin": {
            "token_sha256": sha256(TOKENS["admin"]),
            "grants": [{"topics": "*", "allow": ["admin"]}],
        },
        "alice": {
            "token_sha256": sha256(TOKENS["alice"]),
            "grants": [{"topics": "r-*", "allow": alice_allows}],
        },
    }
    if with_bob:
        principals["bob"] = {
            "token_sha256": sha256(TOKENS["bob"]),
            "grants": [{"topics": "r-*", "allow": ["describe"]}],
        }
    return {"principals": principals}


@pytest.fixture
def reloading(tmp_path: Path) -> Iterator[tuple[BrokerProcess, Path]]:
    auth = write_policy(tmp_path / "auth.yaml", _policy(["produce"]))
    broker = BrokerProcess("memory://", tmp_path / "broker.log", {"DEJAQ_AUTH": str(auth)})
    try:
        yield broker.start(), auth
    finally:
        assert broker.stop() == 0


async def _verdict(address: str, principal: str, topic: str) -> str:
    """What the broker says to ``principal`` describing ``topic``: ok, denied or unknown."""
    async with client(address, token=TOKENS[principal]) as c:
        try:
            await Admin(c).describe_topic(topic)
        except PermissionDenied:
            return "denied"
        except Unauthenticated:
            return "unknown"
    return "ok"


def _becomes(address: str, principal: str, topic: str, verdict: str) -> Callable[[], Any]:
    async def check() -> bool:
        return await _verdict(address, principal, topic) == verdict

    return check


async def test_sighup_applies_new_grants_and_principals(
    reloading: tuple[BrokerProcess, Path],
) -> None:
    broker, auth = reloading
    assert broker.process is not None
    async with client(broker.address, token=TOKENS["admin"]) as admin:
        topic = await create_topic(admin, f"r-{uuid.uuid4().hex[:8]}")
    assert await _verdict(broker.address, "alice", topic) == "denied"
    assert await _verdict(broker.address, "bob", topic) == "unknown"

    write_policy(auth, _policy(["produce", "describe"], with_bob=True))
    broker.process.send_signal(signal.SIGHUP)
    await wait_until(_becomes(broker.address, "alice", topic, "ok"), what="alice's new grant")
    assert await _verdict(broker.address, "bob", topic) == "ok"

    write_policy(auth, _policy(["produce"]))  # bob gone, alice back to produce only
    broker.process.send_signal(signal.SIGHUP)
    await wait_until(_becomes(broker.address, "alice", topic, "denied"), what="the revocation")
    assert await _verdict(broker.address, "bob", topic) == "unknown"


async def test_a_bad_file_on_sighup_keeps_the_old_policy(
    reloading: tuple[BrokerProcess, Path],
) -> None:
    broker, auth = reloading
    assert broker.process is not None
    async with client(broker.address, token=TOKENS["admin"]) as admin:
        topic = await create_topic(admin, f"r-{uuid.uuid4().hex[:8]}")
    auth.write_text("principals:\n  alice: {token_sha256: nothex}\n")
    broker.process.send_signal(signal.SIGHUP)
    await wait_until(
        lambda: "auth file not reloaded" in broker.log_path.read_text(), what="the log line"
    )
    assert "token_sha256 'nothex' is not 64 hex digits" in broker.log_tail()
    assert broker.alive
    assert await _verdict(broker.address, "admin", topic) == "ok"
    assert await _verdict(broker.address, "alice", topic) == "denied"
