"""The webhook client's keep-alive connections to one origin (scheme, host, port).

A request takes an idle connection, or dials a new one: the host is resolved
then and only addresses the allowlist admits are dialled (``resolver.py``);
``https`` goes through TLS with the certificate and host name verified against
the system's trusted CAs (OpenSSL's ``SSL_CERT_FILE`` and ``SSL_CERT_DIR``
apply). A connection whose answer leaves it open goes back to the pool. The
number of connections is bounded by the requests in flight (the webhook's
concurrency), so the pool keeps no count of its own.
"""

from __future__ import annotations

import asyncio
import functools
import ssl

from dejaq.broker.webhooks.connection import Answer, Connection
from dejaq.broker.webhooks.resolver import AllowedResolver


@functools.cache
def verified_context() -> ssl.SSLContext:
    """One TLS context for every pool: made once (loading the CAs takes milliseconds)."""
    return ssl.create_default_context()


class Pool:
    def __init__(self, scheme: str, host: str, port: int, resolver: AllowedResolver) -> None:
        self._host = host
        self._port = port
        self._tls = scheme == "https"
        self._resolver = resolver
        self._idle: list[Connection] = []
        self._open: set[Connection] = set()

    def idle(self) -> Connection | None:
        """An open idle connection, taken out of the pool; None when there is none."""
        while self._idle:
            conn = self._idle.pop()  # the most recent: the least likely closed by its peer
            if not conn.closed:
                return conn
            self._open.discard(conn)
        return None

    def done(self, conn: Connection) -> None:
        """``conn``'s request was answered: it goes back to the pool if it may."""
        if conn.reusable and not conn.closed:
            self._idle.append(conn)
        else:
            self._open.discard(conn)

    def drop(self, conn: Connection) -> None:
        conn.abort()
        self._open.discard(conn)

    async def post(self, request: bytes) -> Answer:
        """Send ``request`` and read its answer. The caller bounds the time
        (a cancelled request drops its connection)."""
        while (conn := self.idle()) is not None:
            try:
                return await self._exchange(conn, request)
            except ConnectionError:
                if conn.received:
                    raise
                # The peer closed an idle connection as we wrote (its keep-alive ran
                # out): nothing was answered, so the request goes on a new connection.
        return await self._exchange(await self._dial(), request)

    async def _exchange(self, conn: Connection, request: bytes) -> Answer:
        future: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()
        conn.send(request, functools.partial(_resolve, future))
        try:
            answer = await future
        except BaseException:
            self.drop(conn)
            raise
        self.done(conn)
        return answer

    async def _dial(self) -> Connection:
        addresses = await self._resolver.resolve(self._host, self._port)
        loop = asyncio.get_running_loop()
        error: OSError | None = None
        for address in addresses:
            try:
                _, conn = await loop.create_connection(
                    Connection,
                    address,
                    self._port,
                    ssl=verified_context() if self._tls else None,
                    server_hostname=self._host if self._tls else None,
                )
            except OSError as exc:
                error = exc
                continue
            self._open.add(conn)
            return conn
        raise error or ConnectionError(f"{self._host} resolved to no address")

    def close(self) -> None:
        for conn in self._open:
            conn.close()
        self._open.clear()
        self._idle.clear()


def _resolve(future: asyncio.Future[Answer], outcome: Answer | Exception) -> None:
    if future.done():  # cancelled: its caller has gone
        return
    if isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
