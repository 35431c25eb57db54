"""Brokers reach etcd over TLS (https://, the CA to trust, a client certificate)
and log in with a user and password read from a file; what etcd refuses stops
a broker at start-up with a clear error, and the password is never printed.

Each story runs against an etcd of this module's own (TLS, client certificates
required; one of them with authentication on), not the session's shared one.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.certs import Certs
from tests.cluster.support import Cluster, status
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import wait_until
from tests.e2e.test_cli import DEJAQ, TIMEOUT_S
from tests.etcd_server import EtcdServer
from tests.servers import require_binary, running, temporary_root

USER = "dejaq"
PASSWORD = "etcd-s3cret-" + uuid.uuid4().hex[:8]
NEW_PASSWORD = "etcd-n3w-" + uuid.uuid4().hex[:8]


@pytest.fixture(scope="module")
def tls_etcd(certs: Certs) -> Iterator[EtcdServer]:
    server = EtcdServer(require_binary("etcd"), temporary_root("etcd-tls"), tls=certs)
    with running(server) as started:
        yield started


@pytest.fixture(scope="module")
def auth_etcd(certs: Certs) -> Iterator[EtcdServer]:
    server = EtcdServer(require_binary("etcd"), temporary_root("etcd-auth"), tls=certs)
    with running(server) as started:
        started.enable_auth(USER, PASSWORD)
        yield started


def tls_env(certs: Certs, ca: Path | None = None) -> dict[str, str]:
    client = certs.client("broker")
    return {
        "DEJAQ_ETCD_CA": str(ca or certs.ca),
        "DEJAQ_ETCD_CERT": str(client.cert),
        "DEJAQ_ETCD_KEY": str(client.key),
    }


def refused_start(etcd: EtcdServer, tmp_path: Path, env: dict[str, str], *flags: str) -> str:
    """Start a broker that must not start: its stderr, after checking it exits 1."""
    storage = f"sqlite:///{tmp_path}/d.db"
    done = subprocess.run(
        [*DEJAQ, "broker", "--listen", "127.0.0.1:0", "--storage", storage, *flags],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "DEJAQ_ETCD": etcd.url, "DEJAQ_ETCD_TIMEOUT_S": "2", **env},
    )
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "dejaq broker listening" not in done.stdout
    return done.stderr


def new_cluster(etcd: EtcdServer, tmp_path: Path) -> Cluster:
    return Cluster(f"tls-{uuid.uuid4().hex[:8]}", etcd.url, tmp_path)


async def test_brokers_join_a_cluster_over_mutual_tls(
    tls_etcd: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    # Given an etcd that speaks only https and wants client certificates
    cluster = new_cluster(tls_etcd, tmp_path)
    try:
        # When two brokers start with the CA, a client certificate and its key
        b0, b1 = (b.address for b in cluster.start(2, **tls_env(certs)))

        # Then they see each other through etcd
        async def both() -> bool:
            s = await status(b0)
            return s.healthy and {b.address for b in s.brokers} == {b0, b1}

        await wait_until(both, 10, "both brokers in the TLS cluster")
    finally:
        assert set(cluster.stop_all().values()) == {0}


def test_a_broker_without_a_client_certificate_is_refused(
    tls_etcd: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    stderr = refused_start(tls_etcd, tmp_path, {"DEJAQ_ETCD_CA": str(certs.ca)})

    assert "cannot reach etcd at https://127.0.0.1" in stderr


def test_a_broker_that_trusts_another_ca_is_refused(
    tls_etcd: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    stderr = refused_start(tls_etcd, tmp_path, tls_env(certs, ca=certs.other_ca))

    assert "cannot reach etcd" in stderr


def test_plain_http_to_a_tls_etcd_is_refused(
    tls_etcd: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    plain = tls_etcd.url.replace("https://", "http://")

    stderr = refused_start(tls_etcd, tmp_path, {"DEJAQ_ETCD": plain})

    assert "cannot reach etcd at http://127.0.0.1" in stderr


def test_a_missing_certificate_file_is_named(
    tls_etcd: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere" / "ca.pem"
    client = certs.client("broker")
    flags = ["--etcd-ca", str(missing), "--etcd-cert", str(client.cert)]

    stderr = refused_start(tls_etcd, tmp_path, {}, *flags, "--etcd-key", str(client.key))

    assert f"cannot read the etcd CA '{missing}'" in stderr


async def test_a_broker_logs_in_with_a_password_file_and_never_prints_it(
    auth_etcd: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    # Given an etcd with authentication on, and the password in a file (as a Secret mounts it)
    password_file = tmp_path / "etcd-password"
    password_file.write_text(PASSWORD + "\n")
    client = certs.client("broker")
    flags = ["--etcd", auth_etcd.url, "--cluster", f"auth-{uuid.uuid4().hex[:8]}"]
    flags += ["--etcd-ca", str(certs.ca), "--etcd-cert", str(client.cert)]
    flags += ["--etcd-key", str(client.key), "--etcd-user", USER]
    flags += ["--etcd-password-file", str(password_file)]
    storage = f"sqlite:///{tmp_path / 'd.db'}"
    broker = BrokerProcess(storage, tmp_path / "broker.log", {"DEJAQ_LOG_LEVEL": "DEBUG"}, flags)
    try:
        # When a broker starts with these flags, at debug level
        broker.start()

        # Then it joins the cluster
        async def joined() -> bool:
            return (await status(broker.address)).healthy

        await wait_until(joined, 10, "the broker to join through authenticated etcd")

        # And when etcd restarts (its login tokens die with it), the broker logs in again
        auth_etcd.kill()

        async def lost() -> bool:
            return not await joined()

        await wait_until(lost, 15, "the broker to see etcd gone")
        auth_etcd.start()
        await wait_until(joined, 15, "the broker to rejoin after an etcd restart")

        # And when the password changes in etcd, the broker says it cannot log in ...
        auth_etcd.change_password(USER, NEW_PASSWORD)
        await wait_until(lost, 15, "the broker to lose its session with its old password")
        await wait_until(
            lambda: (
                "cannot rejoin etcd until this is fixed: etcd refused user 'dejaq'"
                in broker.log_path.read_text()
            ),
            15,
            "the broker to say etcd refuses its password",
        )
        # ... until the file holds the new one: read again, without a restart
        password_file.write_text(NEW_PASSWORD + "\n")
        await wait_until(joined, 15, "the broker to rejoin with the new password")
    finally:
        assert broker.stop() == 0
        auth_etcd.change_password(USER, PASSWORD)  # as the other stories expect
    # And neither password is anywhere in what it wrote
    written = "".join(broker.banner) + broker.log_path.read_text()
    assert PASSWORD not in written and NEW_PASSWORD not in written


def test_a_wrong_password_is_refused_and_not_printed(
    auth_etcd: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    wrong = "not-the-" + PASSWORD
    env = {**tls_env(certs), "DEJAQ_ETCD_USER": USER, "DEJAQ_ETCD_PASSWORD": wrong}

    stderr = refused_start(auth_etcd, tmp_path, {**env, "DEJAQ_LOG_LEVEL": "DEBUG"})

    assert "etcd refused user 'dejaq': etcdserver: authentication failed" in stderr
    assert wrong not in stderr


def test_without_credentials_an_authenticated_etcd_refuses_the_broker(
    auth_etcd: EtcdServer, certs: Certs, tmp_path: Path
) -> None:
    # The client certificate's name (CN=broker) is no etcd user: no way in.
    stderr = refused_start(auth_etcd, tmp_path, tls_env(certs))

    assert "cannot reach etcd" in stderr
