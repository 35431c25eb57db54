"""The webhook client's connections against a real TCP endpoint on loopback: how
answers are framed, kept alive, closed, and a keep-alive the peer ended."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from dejaq.broker.webhook_targets import Allowlist
from dejaq.broker.webhooks.connection import Answer
from dejaq.broker.webhooks.pool import Pool
from dejaq.broker.webhooks.resolver import AllowedResolver

pytestmark = pytest.mark.timeout(20)

REQUEST = b"POST /h HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\nhi"
Reply = Callable[[int], bytes]  # the raw answer to the n-th request of a connection


class Endpoint:
    """Answers each request with raw bytes; counts connections and requests."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.connections = 0
        self.requests: list[bytes] = []
        self.port = 0
        self.close_after = False  # end each connection after one answer, unannounced

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        n = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                self.requests.append(head + await reader.readexactly(length))
                answer = self.reply(n)
                n += 1
                writer.write(answer)
                await writer.drain()
                if self.close_after or answer.endswith(b"<close>"):
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@pytest.fixture
async def serve() -> AsyncIterator[Callable[[Reply], Awaitable[Endpoint]]]:
    servers: list[asyncio.Server] = []

    async def make(reply: Reply) -> Endpoint:
        endpoint = Endpoint(reply)
        server = await asyncio.start_server(endpoint.serve, "127.0.0.1", 0)
        endpoint.port = server.sockets[0].getsockname()[1]
        servers.append(server)
        return endpoint

    yield make
    for server in servers:
        server.close()


def pool_for(endpoint: Endpoint) -> Pool:
    return Pool("http", "127.0.0.1", endpoint.port, AllowedResolver(Allowlist.parse("127.0.0.1")))


Serve = Callable[[Reply], Awaitable[Endpoint]]
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


async def test_a_kept_alive_connection_carries_the_next_request(serve: Serve) -> None:
    # Given an endpoint answering with a sized body, then a chunked one
    chunked = b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    endpoint = await serve(lambda n: OK if n == 0 else chunked)
    pool = pool_for(endpoint)
    # When two requests go one after the other
    first = await pool.post(REQUEST)
    second = await pool.post(REQUEST)
    pool.close()
    # Then both are answered over one connection, each request whole
    assert (first.status, second.status) == (200, 204)
    assert endpoint.connections == 1 and endpoint.requests == [REQUEST, REQUEST]


async def test_retry_after_is_read_and_connection_close_is_honoured(serve: Serve) -> None:
    # Given an endpoint that asks for a pause and closes, its body read up to the close
    endpoint = await serve(
        lambda n: b"HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nConnection: close\r\n\r\n<close>"
    )
    pool = pool_for(endpoint)
    # When two requests go
    first = await pool.post(REQUEST)
    second = await pool.post(REQUEST)
    pool.close()
    # Then each gets the status and Retry-After, on a connection of its own
    assert first == (429, "7") and second == (429, "7")
    assert endpoint.connections == 2


async def test_an_interim_answer_is_passed_over(serve: Serve) -> None:
    endpoint = await serve(lambda n: b"HTTP/1.1 100 Continue\r\n\r\n" + OK)
    pool = pool_for(endpoint)
    answer = await pool.post(REQUEST)
    pool.close()
    assert answer == (200, None)


async def test_a_keep_alive_the_peer_ended_is_replaced_by_a_new_connection(serve: Serve) -> None:
    # Given an endpoint that ends each connection after its answer, saying nothing of it
    endpoint = await serve(lambda n: OK)
    endpoint.close_after = True
    pool = pool_for(endpoint)
    await pool.post(REQUEST)
    # When the next request goes (the idle connection closed, or closing as it is written)
    answer = await pool.post(REQUEST)
    pool.close()
    # Then it is answered, on a second connection
    assert answer.status == 200 and endpoint.connections == 2


async def test_a_broken_answer_fails_the_request(serve: Serve) -> None:
    endpoint = await serve(lambda n: b"NOT HTTP AT ALL\r\n\r\n")
    pool = pool_for(endpoint)
    with pytest.raises(ConnectionError, match="not HTTP"):
        await pool.post(REQUEST)
    pool.close()


async def test_a_request_whose_time_ran_out_fails_and_leaves_the_pool(serve: Serve) -> None:
    # Given a kept-alive connection to an endpoint that answers once, then never again
    endpoint = await serve(lambda n: OK if n == 0 else b"")
    pool = pool_for(endpoint)
    await pool.post(REQUEST)
    conn = pool.idle()
    assert conn is not None
    # When a request on it gets no answer before its time runs out
    outcomes: list[Answer | Exception] = []
    conn.send(REQUEST, outcomes.append)
    conn.expire()
    # Then it fails as a timeout, once, and the connection is not reused
    (outcome,) = outcomes
    assert isinstance(outcome, TimeoutError)
    assert conn.closed and pool.idle() is None
    pool.close()
