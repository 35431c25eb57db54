"""A broker started with passwords never shows them, and /metrics can take TLS.

The broker runs on ``rediss://`` storage with a password (a real redis-server,
TLS only, client certificates required) and serves /metrics over HTTPS to
scrapers with a client certificate; or on PostgreSQL over TLS (verify-full)
with the password in ``PGPASSWORD``. Everything it writes (stdout, its log at
DEBUG in both formats, the metrics) is searched for the password.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from dejaq.core.model import InsertStatus
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from tests.certs import Certs
from tests.e2e.broker_process import BrokerProcess, StartBroker
from tests.e2e.support import now_ms
from tests.e2e.test_cli import DEJAQ, TIMEOUT_S
from tests.postgres_server import PostgresServer
from tests.redis_sentinel import RedisSentinel
from tests.redis_server import RedisServer
from tests.servers import free_port


def scrape(port: int, context: ssl.SSLContext | None, scheme: str = "https") -> str:
    url = f"{scheme}://127.0.0.1:{port}/metrics"
    with urllib.request.urlopen(url, timeout=5, context=context) as reply:
        return str(reply.read().decode())


def scraper(certs: Certs, with_certificate: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca))
    if with_certificate:
        client = certs.client("prometheus")
        context.load_cert_chain(str(client.cert), str(client.key))
    return context


def start_secure(
    start_broker: StartBroker, server: RedisServer, certs: Certs, log_format: str
) -> tuple[BrokerProcess, int]:
    port = free_port()
    broker = start_broker(
        server.url,
        DEJAQ_METRICS=f"127.0.0.1:{port}",
        DEJAQ_METRICS_TLS_CERT=str(certs.server.cert),
        DEJAQ_METRICS_TLS_KEY=str(certs.server.key),
        DEJAQ_METRICS_TLS_CLIENT_CA=str(certs.ca),
        DEJAQ_METRICS_REFRESH_MS="200",
        DEJAQ_LOG_FORMAT=log_format,
        DEJAQ_LOG_LEVEL="DEBUG",
    )
    return broker, port


@pytest.mark.parametrize("log_format", ["text", "json"])
async def test_a_broker_on_a_password_protected_tls_redis_never_shows_the_password(
    start_broker: StartBroker,
    tls_redis_server: RedisServer,
    certs: Certs,
    log_format: str,
) -> None:
    # Given a broker on rediss:// with a password, /metrics over HTTPS
    password = tls_redis_server.password
    tls_redis_server.flush()
    broker, port = start_secure(start_broker, tls_redis_server, certs, log_format)

    # When it works: a topic, messages stored through TLS, a scrape
    async with Client(broker.address) as client:
        await Admin(client).create_topic("secrets")
        async with Producer(client, "secrets") as producer:
            sent = await producer.send_batch([Outgoing(b"x", now_ms() + 60_000, id="m1")])
    assert [r.status for r in sent] == [InsertStatus.ACCEPTED]
    metrics = scrape(port, scraper(certs))

    # Then the start-up line shows the storage with the password masked
    assert any("(storage rediss://:***@127.0.0.1:" in line for line in broker.banner)
    assert any(
        line.startswith(f"dejaq metrics on https://127.0.0.1:{port}/") for line in broker.banner
    )
    assert 'dejaq_produced_total{kind="timeline",topic="secrets"} 1.0' in metrics
    assert broker.stop() == 0
    # And the password is nowhere: not on stdout, not in the log, not in the metrics
    for text in ("".join(broker.banner), broker.log_path.read_text(), metrics):
        assert password not in text


async def test_metrics_over_tls_want_the_client_certificate(
    start_broker: StartBroker,
    tls_redis_server: RedisServer,
    certs: Certs,
) -> None:
    _, port = start_secure(start_broker, tls_redis_server, certs, "text")

    # A scraper with a certificate signed by the client CA gets the metrics
    assert "dejaq_" in scrape(port, scraper(certs))
    # Without a certificate, or over plain HTTP, it gets nothing
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        scrape(port, scraper(certs, with_certificate=False))
    with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
        scrape(port, None, scheme="http")
    # And a scraper that does not trust the broker's CA refuses it
    with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
        scrape(port, ssl.create_default_context(cafile=str(certs.other_ca)))
    # A client that connects and says nothing holds up nobody
    with socket.create_connection(("127.0.0.1", port)):
        assert "dejaq_" in scrape(port, scraper(certs))


@pytest.mark.parametrize(
    "url",
    [
        "redis://:{pw}@127.0.0.1:1/not-a-db",
        "postgresql://u:{pw}@h/d?bogus=1",
        "mysql://u:{pw}@h/d",
        "sqlite://u:{pw}@h/d.db",
    ],
)
def test_a_refused_storage_url_is_quoted_without_its_password(url: str) -> None:
    password = "hunter2-" + os.urandom(4).hex()

    done = subprocess.run(
        [*DEJAQ, "broker", "--listen", "127.0.0.1:0", "--storage", url.format(pw=password)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )

    assert done.returncode == 1
    assert "dejaq: error:" in done.stderr
    assert password not in done.stdout + done.stderr


def test_a_broker_on_postgresql_verify_full_takes_the_password_from_pgpassword(
    start_broker: StartBroker,
    tls_postgres_server: PostgresServer,
) -> None:
    # Given the URL of a TLS-only server, verify-full, and no password in it
    url = tls_postgres_server.url().replace(f":{tls_postgres_server.password}@", "@")
    assert "sslmode=verify-full&sslrootcert=" in url

    # When a broker starts with the password in PGPASSWORD (libpq reads it)
    broker = start_broker(url, PGPASSWORD=tls_postgres_server.password, DEJAQ_LOG_LEVEL="DEBUG")

    # Then it serves, and shows the URL as given, the password nowhere
    assert any(f"(storage {url})" in line for line in broker.banner)
    assert broker.stop() == 0
    assert tls_postgres_server.password not in "".join(broker.banner) + broker.log_path.read_text()


def test_metrics_tls_flags_name_a_certificate_that_cannot_be_loaded(tmp_path: Path) -> None:
    missing = tmp_path / "metrics.pem"
    flags = ["--metrics", "127.0.0.1:0", "--metrics-tls-cert", str(missing)]
    flags += ["--metrics-tls-key", str(missing)]

    done = subprocess.run(
        [*DEJAQ, "broker", "--listen", "127.0.0.1:0", "--storage", "memory://", *flags],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )

    assert done.returncode == 1
    assert f"metrics TLS: cannot load certificate '{missing}'" in done.stderr


async def test_a_broker_on_password_protected_sentinels_never_shows_their_password(
    start_broker: StartBroker, auth_redis_sentinel: RedisSentinel
) -> None:
    # Given sentinels that want a password, given to the broker as sentinel_password
    group = auth_redis_sentinel
    group.flush()
    url = f"{group.url}?sentinel_password={group.sentinel_password}"

    # When a broker starts on them and stores a message
    broker = start_broker(url, DEJAQ_LOG_LEVEL="DEBUG")
    async with Client(broker.address) as client:
        await Admin(client).create_topic("watched")
        async with Producer(client, "watched") as producer:
            sent = await producer.send_batch([Outgoing(b"x", now_ms() + 60_000, id="m1")])
    assert [r.status for r in sent] == [InsertStatus.ACCEPTED]

    # Then its start-up line shows the URL with the sentinels' password masked
    assert any(f"(storage {group.url}?sentinel_password=***)" in line for line in broker.banner)
    assert broker.stop() == 0
    # And the password is nowhere in what it wrote
    assert group.sentinel_password not in "".join(broker.banner) + broker.log_path.read_text()


@pytest.mark.parametrize("given", ["", "?sentinel_password=wrong-{pw}"], ids=["none", "wrong"])
def test_a_broker_the_sentinels_refuse_says_so_in_one_line(
    auth_redis_sentinel: RedisSentinel, given: str
) -> None:
    # Given sentinels that want a password, and a URL without it or with a wrong one
    group = auth_redis_sentinel
    url = group.url + given.format(pw=group.sentinel_password)

    # When a broker starts on them
    done = subprocess.run(
        [*DEJAQ, "broker", "--listen", "127.0.0.1:0", "--storage", url],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )

    # Then it stops at once with one error line naming the sentinels, no traceback
    assert done.returncode == 1
    assert "refused authentication" in done.stderr
    assert f"127.0.0.1:{group.sentinels[0].port}" in done.stderr
    assert "Traceback" not in done.stderr
    assert group.sentinel_password not in done.stdout + done.stderr
