"""``dejaq broker``'s security flags: what it refuses at start-up, by name,
before it opens storage or a port, and the DEJAQ_* twins of the flags."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from dejaq.broker.config import BrokerConfig
from dejaq.core.errors import InvalidArgument, PermissionDenied
from dejaq.driver.admin import Admin
from tests.certs import Certs
from tests.e2e.support import create_topic
from tests.security.support import DEJAQ, TOKENS, cli, client, serve, standard_policy, write_policy


def _refused(*args: str, env: dict[str, str] | None = None) -> str:
    done = cli("broker", "--storage", "memory://", "--listen", "127.0.0.1:0", *args, env=env)
    assert done.returncode == 1, done.stdout
    assert "listening" not in done.stdout
    return done.stderr


def test_a_non_loopback_address_without_auth_is_refused() -> None:
    done = cli("broker", "--storage", "memory://", "--listen", "0.0.0.0:0")
    assert done.returncode == 1
    assert "refusing to serve 0.0.0.0:0 without --auth" in done.stderr
    assert "--insecure-allow-anonymous" in done.stderr


@pytest.mark.parametrize("listen", ["0.0.0.0:7700", "10.1.2.3:7700", "[::]:7700", "example.com:1"])
def test_anonymous_off_loopback_needs_the_insecure_flag(listen: str) -> None:
    with pytest.raises(InvalidArgument, match="without --auth"):
        BrokerConfig.from_sources({"listen": listen}, {})
    assert BrokerConfig.from_sources({"listen": listen, "insecure_allow_anonymous": True}, {})
    env = {"DEJAQ_LISTEN": listen, "DEJAQ_INSECURE_ALLOW_ANONYMOUS": "true"}
    assert BrokerConfig.from_sources({}, env).insecure_allow_anonymous
    assert BrokerConfig.from_sources({"listen": listen, "auth": "auth.yaml"}, {}).auth


@pytest.mark.parametrize("listen", ["127.0.0.1:7700", "localhost:7700", "[::1]:7700"])
def test_loopback_may_be_anonymous(listen: str) -> None:
    assert not BrokerConfig.from_sources({"listen": listen}, {}).auth


def test_security_variables_are_read_and_client_ones_are_not_refused() -> None:
    env = {
        "DEJAQ_TLS_CERT": "c.pem",
        "DEJAQ_TLS_KEY": "k.pem",
        "DEJAQ_TLS_CLIENT_CA": "ca.pem",
        "DEJAQ_AUTH": "auth.json",
        "DEJAQ_TLS_CA": "client-side.pem",  # a client's, sharing the environment
        "DEJAQ_TOKEN": "client-side",
    }
    config = BrokerConfig.from_sources({}, env)
    assert (config.tls_cert, config.tls_key, config.tls_client_ca, config.auth) == (
        "c.pem",
        "k.pem",
        "ca.pem",
        "auth.json",
    )
    with pytest.raises(InvalidArgument, match="not a boolean"):
        BrokerConfig.from_sources({}, {"DEJAQ_INSECURE_ALLOW_ANONYMOUS": "maybe"})


def test_tls_flag_mistakes_are_named(certs: Certs, tmp_path: Path) -> None:
    cert, key = str(certs.server.cert), str(certs.server.key)
    assert "needs both --tls-cert and --tls-key" in _refused("--tls-cert", cert)
    assert "needs both --tls-cert and --tls-key" in _refused("--tls-key", key)
    assert "--tls-client-ca (mutual TLS) needs --tls-cert" in _refused(
        "--tls-client-ca", str(certs.ca)
    )
    missing = str(tmp_path / "nope.pem")
    assert f"cannot read --tls-cert {missing}: No such file" in _refused(
        "--tls-cert", missing, "--tls-key", key
    )
    # A folder cannot be read as a file, whoever runs the test (root reads a 0o000 file).
    assert f"cannot read --tls-key {tmp_path}: Is a directory" in _refused(
        "--tls-cert", cert, "--tls-key", str(tmp_path)
    )
    (tmp_path / "junk.pem").write_text("not a certificate")
    assert "is not a PEM file" in _refused(
        "--tls-cert", str(tmp_path / "junk.pem"), "--tls-key", key
    )
    other = certs.client("mismatch")
    assert "are not a certificate and its private key" in _refused(
        "--tls-cert", cert, "--tls-key", str(other.key)
    )
    assert "--tls-client-ca" in _refused(
        "--tls-cert", cert, "--tls-key", key, "--tls-client-ca", str(certs.server.key)
    )


def test_a_bad_auth_file_stops_the_start(tmp_path: Path) -> None:
    assert "cannot read auth file" in _refused("--auth", str(tmp_path / "absent.yaml"))
    bad = write_policy(tmp_path / "bad.json", {"principals": {"p": {"cert_cn": "x", "role": 1}}})
    assert "unknown key 'role'" in _refused("--auth", str(bad))


async def test_the_flags_serve_mutual_tls_and_auth(certs: Certs, tmp_path: Path) -> None:
    """The flags themselves (the shared brokers take the DEJAQ_* twins)."""
    auth = write_policy(tmp_path / "auth.yaml", standard_policy())
    base = {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
    # An auth file's own path and TLS files as flags; the client's by its own flags.
    argv = [*DEJAQ, "broker", "--storage", "memory://", "--listen", "127.0.0.1:0"]
    argv += ["--tls-cert", str(certs.server.cert), "--tls-key", str(certs.server.key)]
    argv += ["--tls-client-ca", str(certs.ca), "--auth", str(auth)]
    process, address = serve(argv, base, tmp_path / "broker.log")
    try:
        async with client(address, certs, cn="ops") as ops:
            topic = await create_topic(ops, f"t-{uuid.uuid4().hex[:8]}")
        async with client(address, certs, cn="ops", token=TOKENS["describer"]) as describer:
            assert (await Admin(describer).describe_topic(topic)).topic.name == topic
            with pytest.raises(PermissionDenied):
                await Admin(describer).delete_topic(topic)
        assert "mutual TLS, 7 principals" in (tmp_path / "broker.log").read_text()
    finally:
        process.terminate()
        assert process.wait(10) == 0
        if process.stdout is not None:
            process.stdout.close()
