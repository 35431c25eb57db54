"""Brokers for the security stories: real ``dejaq broker`` processes on
loopback, with TLS, mutual TLS and an auth file as the test asks, shared for
the session by settings (tests use topics of their own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.certs import Certs
from tests.e2e.broker_process import BrokerProcess, storage_url
from tests.security.support import standard_policy, tls_env, write_policy


class SecureBrokers:
    """Shared brokers by name, started on first use, stopped at session end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.running: dict[str, BrokerProcess] = {}

    def get(self, name: str, kind: str, **env: str) -> BrokerProcess:
        broker = self.running.get(name)
        if broker is None:
            folder = self.folder / name
            folder.mkdir()
            broker = BrokerProcess(storage_url(kind, folder), folder / "broker.log", env)
            self.running[name] = broker.start()
        assert broker.alive, f"the {name} broker died; its log ends:\n{broker.log_tail()}"
        return broker


@pytest.fixture(scope="session")
def secure_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureBrokers]:
    running = SecureBrokers(tmp_path_factory.mktemp("secure-brokers"))
    try:
        yield running
    finally:
        codes = {name: b.stop() for name, b in running.running.items()}
    assert all(code == 0 for code in codes.values()), f"broker exit codes: {codes}"


@pytest.fixture(scope="session")
def auth_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The standard auth file (see support.py), as YAML."""
    return write_policy(tmp_path_factory.mktemp("auth") / "auth.yaml", standard_policy())


@pytest.fixture
def tls_broker(secure_brokers: SecureBrokers, certs: Certs) -> BrokerProcess:
    """TLS, no client certificates, no --auth (anonymous on loopback)."""
    return secure_brokers.get("tls", "memory", **tls_env(certs))


@pytest.fixture
def mtls_broker(secure_brokers: SecureBrokers, certs: Certs, auth_file: Path) -> BrokerProcess:
    """Mutual TLS and the standard auth file."""
    return secure_brokers.get(
        "mtls", "memory", **tls_env(certs, mutual=True), DEJAQ_AUTH=str(auth_file)
    )


@pytest.fixture
def auth_broker(secure_brokers: SecureBrokers, auth_file: Path) -> BrokerProcess:
    """Plaintext on loopback with the standard auth file (tokens over loopback)."""
    return secure_brokers.get("auth", "memory", DEJAQ_AUTH=str(auth_file))


@pytest.fixture
def tls_auth_broker(secure_brokers: SecureBrokers, certs: Certs, auth_file: Path) -> BrokerProcess:
    """TLS and the standard auth file, on SQLite."""
    return secure_brokers.get("tls-auth", "sqlite", **tls_env(certs), DEJAQ_AUTH=str(auth_file))


@pytest.fixture
def anonymous_broker(secure_brokers: SecureBrokers) -> BrokerProcess:
    """Plaintext on loopback, no --auth: the anonymous mode."""
    return secure_brokers.get("anonymous", "memory")
