"""PostgreSQL over TLS: libpq's ``sslmode`` and friends pass through the URL.

A real server of this module's own takes TCP connections only over TLS and
with a password; the storage connects with ``sslmode=verify-full`` (the
server's certificate must be signed by the CA in ``sslrootcert`` and name the
host), and what the server or libpq refuses fails ``open`` without the
password in the message.
"""

from __future__ import annotations

import pytest

from dejaq.core.errors import StorageError
from dejaq.core.model import InsertStatus, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.postgres.options import parse_url
from tests.certs import Certs
from tests.postgres_server import PostgresServer


@pytest.fixture
def tls_postgres(tls_postgres_server: PostgresServer) -> PostgresServer:
    tls_postgres_server.reset()
    return tls_postgres_server


async def test_messages_go_through_a_verified_tls_connection(tls_postgres: PostgresServer) -> None:
    # Given the URL with sslmode=verify-full, the CA and the password
    url = tls_postgres.url()
    assert "sslmode=verify-full" in url
    storage = storage_from_url(url)
    await storage.open()
    try:
        # When a message is stored and read back
        await storage.create_topic(Topic("t", TopicSettings(buckets=4)))
        inserted = await storage.insert("t", [NewMessage("m1", 1000, b"over tls", 0)])

        # Then it is there
        assert inserted == [InsertStatus.ACCEPTED]
        assert (await storage.get("t", "m1")).payload == b"over tls"
    finally:
        await storage.close()


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda url, certs: url.replace(str(certs.ca), str(certs.other_ca)), "certificate verify"),
        (lambda url, certs: url.split("?")[0] + "?sslmode=disable", "no encryption"),
        (lambda url, certs: url.replace(":pg-s3cret-", ":wrong-pg-s3cret-"), "password"),
    ],
    ids=["other CA", "no TLS", "wrong password"],
)
async def test_what_the_server_or_libpq_refuses_fails_to_open(
    tls_postgres: PostgresServer, certs: Certs, change: object, expected: str
) -> None:
    url = change(tls_postgres.url(), certs)  # type: ignore[operator]
    storage = storage_from_url(url)

    with pytest.raises(StorageError) as refused:
        await storage.open()

    assert expected in str(refused.value)
    assert tls_postgres.password not in str(refused.value)


def test_tls_options_pass_through_to_libpq() -> None:
    url = "postgresql://u@db/d?sslmode=verify-full&sslrootcert=/ca.pem&sslcert=/c.pem&sslkey=/k.pem"

    conninfo = parse_url(url).conninfo

    for option in ("sslmode=verify-full", "sslrootcert=%2Fca.pem", "sslcert=%2Fc.pem"):
        assert option in conninfo
