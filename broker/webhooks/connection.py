"""One keep-alive HTTP/1.1 connection of the webhook client: a request out, its answer in.

An asyncio ``Protocol`` whose answers are read by ``httptools`` (the C parser
uvicorn uses): the status, the ``Retry-After`` header and whether the
connection may carry another request; a body, by ``Content-Length``, chunked or
up to the close, is read and dropped. One request at a time, never pipelined.
Whatever ends a connection mid-request (the peer closes, a bad answer, an
abort) fails the request with a ``ConnectionError``. The request's outcome
goes to the callback it was sent with, called once, from the protocol's own
callbacks: no future and no task per request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import NamedTuple

import httptools


class Answer(NamedTuple):
    status: int
    retry_after: str | None


Done = Callable[[Answer | Exception], None]  # a request's answer, or what ended it


class Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._done: Done | None = None
        self._status = 0
        self._retry_after: str | None = None
        self.closed = False
        self.received = False  # a byte of the current answer came
        self.reusable = False  # the last answer leaves the connection open for another
        self.deadline = 0.0  # when the request in flight times out (its sender's clock)

    # -- asyncio.Protocol -------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ConnectionError("the webhook endpoint switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"the webhook endpoint's answer is not HTTP/1.1: {exc}"))

    def eof_received(self) -> bool | None:
        return None  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.reusable = False
        if self._status >= 200:  # a body read up to the close: the answer is whole
            self._settle(Answer(self._status, self._retry_after))
        else:
            self._settle(
                ConnectionError(f"the webhook endpoint closed the connection: {exc or 'EOF'}")
            )

    # -- httptools callbacks ------------------------------------------------------

    def on_message_begin(self) -> None:
        self._status = 0
        self._retry_after = None

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 11 and name.lower() == b"retry-after":
            self._retry_after = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()

    def on_message_complete(self) -> None:
        if self._status < 200:  # an interim answer (1xx): the final one follows
            self._status = 0
            return
        self.reusable = self._parser.should_keep_alive()
        if not self.reusable:
            self.close()
        self._settle(Answer(self._status, self._retry_after))

    # -- use ----------------------------------------------------------------------

    def send(self, request: bytes, done: Done) -> None:
        """Write ``request`` (head and body) in one write; ``done`` gets its answer."""
        assert self._transport is not None and self._done is None
        self._done = done
        self._status = 0
        self.received = self.reusable = False
        self._transport.write(request)

    def close(self) -> None:
        self.closed = True
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection now: its request's answer, if one comes, is not read."""
        self.closed = True
        self._done = None
        if self._transport is not None:
            self._transport.abort()

    def expire(self) -> None:
        """The request's time ran out: it fails with a ``TimeoutError``."""
        self._fail(TimeoutError("the webhook endpoint did not answer in time"))

    def _fail(self, exc: Exception) -> None:
        self._settle(exc)
        self.abort()

    def _settle(self, outcome: Answer | Exception) -> None:
        done, self._done = self._done, None
        if done is not None:
            done(outcome)
