"""A failed TLS handshake shows in the broker's log as one readable line per
kind, however many clients fail meanwhile, and gRPC's raw C-core line never
shows."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import trustme
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tests.certs import Certs
from tests.e2e.broker_process import BrokerProcess
from tests.security.support import tls_env

ATTEMPTS = 5
PLAINTEXT = "TLS handshake failed: a client spoke plaintext"
REFUSED = "TLS handshake failed: a client's certificate was refused"


@pytest.fixture
def mtls_broker(certs: Certs, tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker of its own (its log holds only this test's handshakes)."""
    broker = BrokerProcess("memory://", tmp_path / "broker.log", tls_env(certs, mutual=True))
    broker.start()
    try:
        yield broker
    finally:
        assert broker.stop() == 0


def check(address: str, credentials: grpc.ChannelCredentials | None) -> bool:
    """One health check on a new connection: whether it was answered."""
    options = [("grpc.use_local_subchannel_pool", 1)]
    channel = (
        grpc.insecure_channel(address, options)
        if credentials is None
        else grpc.secure_channel(address, credentials, options)
    )
    try:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
        return True
    except grpc.RpcError:
        return False
    finally:
        channel.close()


def wait_for(log: Path, texts: list[str], timeout_s: float = 10) -> str:
    deadline = time.monotonic() + timeout_s
    while not all(t in (found := log.read_text()) for t in texts):
        assert time.monotonic() < deadline, f"not in the log: {texts}\n{found}"
        time.sleep(0.05)
    return found


def test_failed_handshakes_log_one_readable_line_per_kind(
    mtls_broker: BrokerProcess, certs: Certs
) -> None:
    ca = certs.ca.read_bytes()
    stranger = trustme.CA().issue_cert("stranger.clients.test", common_name="stranger")
    untrusted = grpc.ssl_channel_credentials(
        ca, stranger.private_key_pem.bytes(), stranger.cert_chain_pems[0].bytes()
    )
    # Given a mutual-TLS broker
    # When clients connect in plaintext, and with a certificate of another CA, again and again
    for _ in range(ATTEMPTS):
        assert not check(mtls_broker.address, None)
        assert not check(mtls_broker.address, untrusted)
    # Then its log says so in words, once per kind
    text = wait_for(mtls_broker.log_path, [PLAINTEXT, REFUSED])
    assert text.count(PLAINTEXT) == 1, text
    assert text.count(REFUSED) == 1, text
    # and gRPC's own line is not there
    assert "ssl_transport_security" not in text, text
    assert "Handshake failed with" not in text, text
    # and a client that holds up its end is served
    good = certs.client("good")
    trusted = grpc.ssl_channel_credentials(ca, good.key.read_bytes(), good.cert.read_bytes())
    assert check(mtls_broker.address, trusted)
