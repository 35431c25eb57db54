"""``EtcdAccess``: what a broker reads to reach etcd, and how it refuses bad files."""

from __future__ import annotations

from pathlib import Path

import pytest

from dejaq.broker.cluster.etcd_access import EtcdAccess
from dejaq.broker.config import BrokerConfig
from dejaq.core.errors import InvalidArgument
from tests.certs import Certs


def access(**env: str) -> EtcdAccess:
    return EtcdAccess.from_config(BrokerConfig.from_sources({}, env))


def test_the_password_file_loses_its_trailing_newline_only(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text(" pass word \n")

    given = access(
        DEJAQ_ETCD="https://e:2379", DEJAQ_ETCD_USER="dejaq", DEJAQ_ETCD_PASSWORD_FILE=str(secret)
    )

    assert given.credentials().password == " pass word "
    assert given.credentials().user == "dejaq"
    assert "pass word" not in repr(given.credentials())


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read the etcd password file"),
        (b"\n", "password for user 'dejaq' is empty"),
        (b"caf\xe9\n", r"password' is not UTF-8 text \(byte 0xe9 at offset 3\)"),
    ],
)
def test_a_missing_empty_or_undecodable_password_file_is_refused(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    secret = tmp_path / "password"
    if content is not None:
        secret.write_bytes(content)
    given = access(
        DEJAQ_ETCD="http://e:2379", DEJAQ_ETCD_USER="dejaq", DEJAQ_ETCD_PASSWORD_FILE=str(secret)
    )

    with pytest.raises(InvalidArgument, match=message):
        given.check()


def test_tls_files_are_read_only_for_https(certs: Certs, tmp_path: Path) -> None:
    client = certs.client("broker")
    tls = access(
        DEJAQ_ETCD="https://e:2379",
        DEJAQ_ETCD_CA=str(certs.ca),
        DEJAQ_ETCD_CERT=str(client.cert),
        DEJAQ_ETCD_KEY=str(tmp_path / "gone.key"),
    )

    assert access(DEJAQ_ETCD="http://e:2379").credentials().channel is None
    assert access(DEJAQ_ETCD="https://e:2379").credentials().channel is not None  # system roots
    with pytest.raises(InvalidArgument, match="cannot read the etcd client key"):
        tls.check()
