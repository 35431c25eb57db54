"""How long a request may take to arrive, and how many connections the HTTP surface holds.

Without them one client could hold the port with connections that never finish
a request: headers sent a byte at a time (slowloris), or a chunked body that
never ends. So:

- **headers**: a request's line and headers must be whole within the header
  timeout of the connection opening or of the previous answer; past it the
  connection is closed (an idle keep-alive connection too). This is aiohttp's
  keep-alive timer, which closes a connection still waiting for a request's head.
  Over TLS the handshake must end within the same time first.
- **body**: a body must be whole within the body timeout of its handler
  starting; past it the request is answered 408 and the connection closed.
- **connections**: at most the bound are open, from accept to close (a TLS
  handshake under way counts); one more is closed at once, unanswered.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class BodyTimeout(asyncio.TimeoutError):
    """A request's body did not arrive in time. A ``TimeoutError``: aiohttp
    drops a body that ends so when it would otherwise read the rest."""


def body_deadline(timeout_s: float) -> Any:
    """A middleware that fails a body read still under way ``timeout_s`` after
    the handler starts with ``BodyTimeout``."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not request.body_exists:
            return await handler(request)
        body = request.content

        def expire() -> None:
            if not body.is_eof():
                body.set_exception(BodyTimeout(f"the body did not arrive in {timeout_s:g} s"))

        timer = asyncio.get_running_loop().call_later(timeout_s, expire)
        try:
            return await handler(request)
        finally:
            timer.cancel()

    return middleware


class _Refused(asyncio.Protocol):
    """A connection past the bound: closed as soon as it is made."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class _Counted(asyncio.Protocol):
    """aiohttp's protocol for one connection, counted from accept until it is lost."""

    def __init__(self, inner: Any, bound: BoundedSite, handshake_s: float) -> None:
        self._inner = inner
        self._bound = bound
        self._counted = False
        self._count(True)
        # A TLS handshake that fails or times out never reaches the protocol: asyncio
        # closes the socket without a connection_lost. Past the handshake timeout a
        # connection not made is over, and uncounted.
        loop = asyncio.get_running_loop()
        self._unmade = loop.call_later(handshake_s + 1, self._count, False)

    def _count(self, counted: bool) -> None:
        if counted != self._counted:
            self._counted = counted
            self._bound.open += 1 if counted else -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._unmade.cancel()
        self._count(True)
        self._inner.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received()  # type: ignore[no-any-return]

    def pause_writing(self) -> None:
        self._inner.pause_writing()

    def resume_writing(self) -> None:
        self._inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._unmade.cancel()
        self._count(False)
        self._inner.connection_lost(exc)


class BoundedSite(web.BaseSite):
    """aiohttp's TCP site with at most ``max_connections`` connections open."""

    __slots__ = ("_address", "_bound_port", "_handshake_s", "_warned", "max_connections", "open")

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        max_connections: int,
        ssl_context: ssl.SSLContext | None = None,
        handshake_s: float = 60.0,
    ) -> None:
        super().__init__(runner, ssl_context=ssl_context)
        self._address = (host, port)
        self._handshake_s = handshake_s
        self._bound_port = port
        self.max_connections = max_connections
        self.open = 0
        self._warned = False

    @property
    def name(self) -> str:
        scheme = "https" if self._ssl_context else "http"
        return f"{scheme}://{self._address[0]}:{self._bound_port}"

    async def start(self) -> None:
        await super().start()
        host, port = self._address
        self._server = await asyncio.get_running_loop().create_server(
            self._protocol,
            host,
            port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            ssl_handshake_timeout=self._handshake_s if self._ssl_context else None,
        )
        if self._server.sockets:
            self._bound_port = self._server.sockets[0].getsockname()[1]

    def _protocol(self) -> asyncio.Protocol:
        if self.open >= self.max_connections:
            if not self._warned:  # once a spell at the bound, not once a connection
                log.warning(
                    "HTTP connections at the bound (%d, --http-max-connections):"
                    " new ones are closed until some end",
                    self.max_connections,
                )
                self._warned = True
            return _Refused()
        if self.open < self.max_connections // 2 + 1:
            self._warned = False
        server = self._runner.server
        assert server is not None
        return _Counted(server(), self, self._handshake_s)
