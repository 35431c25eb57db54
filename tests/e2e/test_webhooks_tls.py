"""Webhook targets over HTTPS: the certificate is verified, by default."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dejaq.core.errors import NotFound
from dejaq.core.model import TopicSettings, Webhook
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.certs import Certs, make_certs
from tests.e2e.broker_process import StartBroker
from tests.e2e.support import now_ms, produce, wait_until

# An HTTPS endpoint in a process of its own (asyncio leaves the server side of
# an aborted handshake to the collector: no business of this test process).
# It prints its port, then POST for each request it answers.
_TLS_SERVER = """
import http.server, ssl, sys
class Hook(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
        print("POST", flush=True)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Hook)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path / "certs")


@pytest.fixture
async def endpoint(certs: Certs) -> AsyncIterator[tuple[str, asyncio.subprocess.Process]]:
    """The HTTPS endpoint's URL and its process (a POST line out per request answered)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _TLS_SERVER,
        str(certs.server.cert),
        str(certs.server.key),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    try:
        port = int(await asyncio.wait_for(proc.stdout.readline(), 20))
        yield f"https://127.0.0.1:{port}/hook", proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        await proc.wait()


async def test_an_untrusted_certificate_is_refused_and_retried(
    start_broker: StartBroker, endpoint: tuple[str, asyncio.subprocess.Process], topic_name: str
) -> None:
    # Given a broker that does not trust the endpoint's CA
    url, server = endpoint
    broker = start_broker("memory://", DEJAQ_WEBHOOK_ALLOW="127.0.0.1")
    async with Client(broker.address) as client:
        hook = Webhook(url, backoff_ms=50)
        await Admin(client).create_topic(topic_name, TopicSettings(webhook=hook))
        await produce(client, topic_name, [Outgoing(b"x", now_ms(), id="s")])

        # Then every attempt fails before a request is sent, and is retried
        async def retried() -> bool:
            return (await Admin(client).get(topic_name, "s")).message.deliveries >= 3

        await wait_until(retried, 15, "three failed attempts")
    server.terminate()
    assert server.stdout is not None
    assert b"POST" not in await server.stdout.read()  # no request got through


async def test_a_certificate_of_a_trusted_ca_is_accepted(
    start_broker: StartBroker,
    endpoint: tuple[str, asyncio.subprocess.Process],
    certs: Certs,
    topic_name: str,
) -> None:
    # Given a broker whose trusted CAs (OpenSSL's SSL_CERT_FILE) hold the endpoint's
    url, server = endpoint
    assert server.stdout is not None
    broker = start_broker("memory://", DEJAQ_WEBHOOK_ALLOW="127.0.0.1", SSL_CERT_FILE=str(certs.ca))
    async with Client(broker.address) as client:
        await Admin(client).create_topic(topic_name, TopicSettings(webhook=Webhook(url)))
        await produce(client, topic_name, [Outgoing(b"x", now_ms(), id="s")])
        # Then the message is posted over HTTPS, answered, and acked
        assert await asyncio.wait_for(server.stdout.readline(), 15) == b"POST\n"

        async def acked() -> bool:
            try:
                await Admin(client).get(topic_name, "s")
            except NotFound:
                return True
            return False

        await wait_until(acked, 10, "acked")
