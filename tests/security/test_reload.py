"""SIGHUP reloads the auth file and the TLS files: new grants, principals and
certificates apply to the next call or connection; files that do not load keep
the ones in force, and the log says why."""

from __future__ import annotations

import signal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from dejaq.core.errors import BrokerUnavailable, PermissionDenied, Unauthenticated
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.tls import ClientTls
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


def _issue(ca: trustme.CA, folder: Path) -> None:
    """A server certificate for 127.0.0.1 from ``ca``, as the broker's files."""
    issued = ca.issue_cert("127.0.0.1")
    issued.private_key_pem.write_to_path(str(folder / "server.key"))
    (folder / "server.pem").write_bytes(b"".join(b.bytes() for b in issued.cert_chain_pems))


async def _answers(address: str, ca: Path) -> bool:
    """Whether a new connection trusting ``ca`` is served."""
    async with Client(address, timeout_s=5, tls=ClientTls(str(ca))) as c:
        try:
            await Admin(c).list_topics()
        except BrokerUnavailable:
            return False
    return True


async def test_sighup_renews_the_tls_certificate(tmp_path: Path) -> None:
    # Given a broker serving a certificate of an old CA
    old, new = trustme.CA(), trustme.CA()
    old.cert_pem.write_to_path(str(tmp_path / "old-ca.pem"))
    new.cert_pem.write_to_path(str(tmp_path / "new-ca.pem"))
    _issue(old, tmp_path)
    env = {
        "DEJAQ_TLS_CERT": str(tmp_path / "server.pem"),
        "DEJAQ_TLS_KEY": str(tmp_path / "server.key"),
    }
    broker = BrokerProcess("memory://", tmp_path / "broker.log", env).start()
    try:
        assert broker.process is not None
        assert await _answers(broker.address, tmp_path / "old-ca.pem")
        assert not await _answers(broker.address, tmp_path / "new-ca.pem")

        # When its files are renewed by the new CA and it gets SIGHUP
        _issue(new, tmp_path)
        broker.process.send_signal(signal.SIGHUP)

        # Then new connections get the new certificate
        await wait_until(
            lambda: _answers(broker.address, tmp_path / "new-ca.pem"), what="the new certificate"
        )
        assert not await _answers(broker.address, tmp_path / "old-ca.pem")

        # And files that do not load on the next SIGHUP keep the ones in force
        (tmp_path / "server.pem").write_text("half written")
        broker.process.send_signal(signal.SIGHUP)
        await wait_until(
            lambda: "TLS files not reloaded" in broker.log_path.read_text(), what="the log line"
        )
        assert await _answers(broker.address, tmp_path / "new-ca.pem")
    finally:
        assert broker.stop() == 0
