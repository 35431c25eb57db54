"""``rediss://``: the Redis backend over TLS, against a real redis-server that
listens only on TLS, asks for a client certificate and a password."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from dejaq.core.errors import InvalidArgument, StorageError
from dejaq.storage_plugins.redis.options import parse_url
from tests.certs import Certs
from tests.redis_server import RedisServer
from tests.storage_plugins.redis_support import ACCEPTED, T, given_topic, msg, opened

PASSWORD = "redis-s3cret-" + uuid.uuid4().hex[:8]  # for URLs that never reach a server


@pytest.fixture
def tls_redis(tls_redis_server: RedisServer) -> RedisServer:
    return tls_redis_server


async def test_messages_go_through_a_tls_connection(tls_redis: RedisServer) -> None:
    # Given the rediss:// URL with the CA, a client certificate and the password
    tls_redis.flush()
    async with opened(tls_redis.url) as storage:
        # When a message is stored and read back
        await given_topic(storage)
        assert await storage.insert(T, [msg("m1")]) == [ACCEPTED]

        # Then it is there
        assert (await storage.get(T, "m1")).payload == b"m1"


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda url, certs: url.replace(str(certs.ca), str(certs.other_ca)), "certificate verify"),
        (lambda url, certs: url.split("&ssl_certfile")[0], ""),  # no client certificate
        (lambda url, certs: url.replace("rediss://", "redis://").split("?")[0], ""),  # plain TCP
    ],
    ids=["other CA", "no client certificate", "plain TCP"],
)
async def test_what_the_server_refuses_fails_to_open(
    tls_redis: RedisServer, certs: Certs, change: object, expected: str
) -> None:
    url = change(tls_redis.url, certs)  # type: ignore[operator]

    with pytest.raises(StorageError) as refused:
        async with opened(url):
            pass

    assert expected in str(refused.value)
    assert tls_redis.password not in str(refused.value)


def test_tls_options_are_read() -> None:
    options = parse_url("rediss://:pw@r:6380/0?ssl_check_hostname=false&topic_slots=2")

    assert options.url == "rediss://:pw@r:6380/0"
    assert options.tls_arguments() == {"ssl_cert_reqs": "required", "ssl_check_hostname": False}
    assert options.topic_slots == 2


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis://r/0?ssl_ca_certs={ca}", "needs a rediss://"),
        ("rediss://r/0?ssl_ca_certs={missing}", "cannot read the file"),
        ("rediss://r/0?ssl_certfile={ca}", "ssl_certfile and ssl_keyfile go together"),
        ("rediss://r/0?ssl_check_hostname=maybe", "true or false"),
        ("rediss://:{password}@r/x", "got 'rediss://:***@r/x'"),
        ("rediss://:{password}@r:99999999/0", "bad port in redis URL 'rediss://:***@r:99999999/0'"),
    ],
)
def test_bad_tls_urls_are_refused_without_the_password(
    url: str, message: str, certs: Certs, tmp_path: Path
) -> None:
    text = url.format(ca=certs.ca, missing=tmp_path / "none.pem", password=PASSWORD)

    with pytest.raises(InvalidArgument) as refused:
        parse_url(text)

    assert message in str(refused.value)
    assert PASSWORD not in str(refused.value)
