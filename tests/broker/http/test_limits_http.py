"""How long a request may take to arrive and how many connections are open:
real sockets against the broker's HTTP port, with short timeouts set as flags.

Given a broker with --http and a short header or body timeout or a small
connection bound, when a client sends its headers a byte at a time, uploads a
chunked body without end, opens more connections than the bound, or leaves
mid-upload, then the broker closes what takes too long, refuses what is past
the bound, keeps serving ordinary requests, and says a client that left in one
line.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time

import aiohttp
import pytest

from tests.broker.http.conftest import Api, Serve
from tests.certs import Certs

DEADLINE_S = 15.0


async def _connect(api: Api) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = api.url.split("://")[1].rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


async def _closed(reader: asyncio.StreamReader) -> bytes:
    """What the broker sent before it closed the connection (a reset ends it too)."""
    got = b""
    try:
        while chunk := await reader.read(4096):
            got += chunk
    except ConnectionResetError:
        pass
    return got


async def _feed_until_closed(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, piece: bytes
) -> bytes:
    """Write ``piece`` again and again until the broker closes the connection;
    what it sent before. Fails if it is still open after ``DEADLINE_S``."""
    closing = asyncio.ensure_future(_closed(reader))
    deadline = time.monotonic() + DEADLINE_S
    try:
        while not closing.done():
            assert time.monotonic() < deadline, "the broker kept the connection open"
            try:
                writer.write(piece)
                await writer.drain()
            except ConnectionError:
                break
            await asyncio.wait([closing], timeout=0.05)
        return await asyncio.wait_for(closing, DEADLINE_S)
    finally:
        writer.close()


def _count(api: Api, method: str, code: str) -> float:
    registry = api.broker.context.metrics.registry
    labels = {"method": method, "code": code}
    return registry.get_sample_value("dejaq_http_requests_total", labels) or 0.0


async def test_headers_sent_a_byte_at_a_time_are_cut_at_the_header_timeout(
    serve: Serve,
) -> None:
    # Given a broker whose requests must have their heads within 300 ms
    api = await serve(http_header_timeout_ms=300)
    reader, writer = await _connect(api)
    started = time.monotonic()
    # When a client sends a request line, then one header byte after another
    writer.write(b"GET /v1/topics HTTP/1.1\r\nHost: x\r\n")
    got = await _feed_until_closed(reader, writer, b"X")
    # Then the broker closes the connection, unanswered, once the timeout passed
    assert got == b""
    assert time.monotonic() - started >= 0.3
    # And an ordinary request is still served
    assert (await api.call("GET", "/v1/topics")).status == 200


async def test_a_tls_handshake_that_never_ends_is_cut_at_the_header_timeout(
    serve: Serve, certs: Certs
) -> None:
    # Given a broker serving HTTPS whose requests must have their heads within 300 ms
    client = ssl.create_default_context(cafile=str(certs.ca))
    api = await serve(
        ssl=client,
        tls_cert=str(certs.server.cert),
        tls_key=str(certs.server.key),
        http_header_timeout_ms=300,
    )
    # When a client connects and never starts the handshake
    reader, writer = await _connect(api)
    # Then the broker closes the connection
    assert await asyncio.wait_for(_closed(reader), DEADLINE_S) == b""
    writer.close()
    # And an ordinary HTTPS request is still served
    assert (await api.call("GET", "/v1/topics")).status == 200


async def test_an_endless_chunked_upload_is_cut_at_the_body_timeout(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a broker whose request bodies must arrive within 300 ms
    api = await serve(http_body_timeout_ms=300)
    before = _count(api, "Produce", "DEADLINE_EXCEEDED")
    reader, writer = await _connect(api)
    # When a client uploads a chunked batch that never ends
    writer.write(
        b"POST /v1/topics/t/batches HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    got = await _feed_until_closed(reader, writer, b"1\r\n \r\n")
    # Then the broker answers 408 (if the client reads it before the close) and closes
    assert got == b"" or got.startswith(b"HTTP/1.1 408 ")
    assert _count(api, "Produce", "DEADLINE_EXCEEDED") == before + 1
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    # And an ordinary request is still served
    assert (await api.call("GET", "/v1/topics")).status == 200


async def test_connections_past_the_bound_are_closed_and_serving_goes_on(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a broker that holds at most 3 HTTP connections
    api = await serve(http_max_connections=3)
    # When 3 clients hold connections open, idle, and a fourth connects
    held = [await _connect(api) for _ in range(3)]
    reader, writer = await _connect(api)
    # Then the fourth is closed unanswered, and the broker says it reached the bound
    assert await asyncio.wait_for(_closed(reader), DEADLINE_S) == b""
    writer.close()
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "--http-max-connections" in warned[0].getMessage()
    # And once the 3 are gone, an ordinary request is served again
    for _, w in held:
        w.close()
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            async with aiohttp.ClientSession() as fresh:
                async with fresh.get(api.url + "/v1/topics") as answer:
                    assert answer.status == 200
                    break
        except aiohttp.ClientConnectionError:
            assert time.monotonic() < deadline, "the bound was never freed"
            await asyncio.sleep(0.05)


async def test_failed_tls_handshakes_give_their_place_under_the_bound_back(
    serve: Serve, certs: Certs
) -> None:
    # Given an HTTPS broker that holds at most 2 connections, heads within 300 ms
    api = await serve(
        ssl=ssl.create_default_context(cafile=str(certs.ca)),
        tls_cert=str(certs.server.cert),
        tls_key=str(certs.server.key),
        http_max_connections=2,
        http_header_timeout_ms=300,
    )
    # When two clients fail their handshakes: one says no TLS, one never starts
    garbage = await _connect(api)
    garbage[1].write(b"GET / HTTP/1.1\r\n\r\n")
    silent = await _connect(api)
    for reader, writer in (garbage, silent):
        await asyncio.wait_for(_closed(reader), DEADLINE_S)
        writer.close()
    # Then their places come back: an ordinary HTTPS request is served again
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            assert (await api.call("GET", "/v1/topics")).status == 200
            break
        except aiohttp.ClientConnectionError:
            assert time.monotonic() < deadline, "failed handshakes kept their places"
            await asyncio.sleep(0.05)


async def test_a_client_leaving_mid_upload_is_one_line_at_debug(
    serve: Serve, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="dejaq.broker.http")
    api = await serve()
    before = _count(api, "CreateTopic", "CANCELLED")
    # When a client sends half a body and closes the connection
    _, writer = await _connect(api)
    writer.write(
        b"POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100000\r\n\r\n{"name": '
    )
    await writer.drain()
    writer.close()
    deadline = time.monotonic() + DEADLINE_S
    while not (said := [r for r in caplog.records if r.name.startswith("dejaq.broker.http")]):
        assert time.monotonic() < deadline, "the broker never saw the client leave"
        await asyncio.sleep(0.02)
    # Then the broker said so in one DEBUG line, with no traceback and no error
    assert [(r.levelno, r.exc_info) for r in said] == [(logging.DEBUG, None)]
    assert "client left POST /v1/topics" in said[0].getMessage()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert _count(api, "CreateTopic", "CANCELLED") == before + 1
