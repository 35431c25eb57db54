"""Connections to brokers: address list, failover, and status -> exception mapping.

Retrying a unary call on UNAVAILABLE is safe only when a second application
cannot differ from the first. Reads and topic calls are tried on every broker
in turn. Version-quoting mutations (Ack, Extend, Nack, Move, Cancel) are not
idempotent: a repeat of an applied one is refused as stale or not found, so a
retry after a lost reply would turn a success into an error, or worse. They
are sent only over a channel that is connected first (``idempotent=False``): a
broker that cannot be reached is skipped for the next one, since the call
surely never left, but once the call is sent an UNAVAILABLE is final and
raised as ``BrokerUnavailable`` saying it may or may not have been applied
(``GetMessage`` tells which).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import grpc

from dejaq.core.addresses import with_port
from dejaq.core.errors import BrokerUnavailable, DejaqError
from dejaq.core.wire.frames import MAX_FRAME_BYTES
from dejaq.core.wire.status import error_for, kind_in
from dejaq.driver.tls import ClientTls, Dialer, client_tls, client_token
from dejaq.proto import dejaq_pb2_grpc as pb_grpc

DEFAULT_BROKER = "127.0.0.1:7700"
T = TypeVar("T")
# How long a non-idempotent call waits for its channel to connect before it
# moves on to the next broker (at most the client's timeout).
CONNECT_TIMEOUT_S = 5.0
# A broker that is gone or going: try the next one.
RETRYABLE = {grpc.StatusCode.UNAVAILABLE}
# grpc.aio reports a write on a stream whose connection just broke as INTERNAL
# with this text, made up on the client side (grpc/grpc#36066): the broker is
# gone, not failing, so it is retried like UNAVAILABLE.
_BROKEN_WRITE = "Internal error from Core"
# Frame limits, and keepalive: a ping every 10 s (no more often than the broker
# allows, broker/server.py), the connection dropped when one goes unanswered for
# 5 s, so a broker that vanished (half-open TCP) is noticed in seconds.
CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_FRAME_BYTES),
    ("grpc.max_send_message_length", MAX_FRAME_BYTES),
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.http2.ping_timeout_ms", 5_000),  # what this gRPC judges a lost ping by
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]


_UNREACHABLE = (grpc.ChannelConnectivity.TRANSIENT_FAILURE, grpc.ChannelConnectivity.SHUTDOWN)


def parse_brokers(brokers: str | Sequence[str] | None) -> list[str]:
    """``"h1:7700,h2:7700"``, a list, or None for ``$DEJAQ_BROKER`` / the default;
    an address without a port gets 7700 (``localhost``, ``[::1]``)."""
    if brokers is None:
        brokers = os.environ.get("DEJAQ_BROKER") or DEFAULT_BROKER
    items = brokers.split(",") if isinstance(brokers, str) else list(brokers)
    addresses = [with_port(a) for a in items if a.strip()]
    if not addresses:
        raise DejaqError("no broker address given")
    return addresses


def retryable(exc: grpc.aio.AioRpcError) -> bool:
    """Whether the call failed because its broker is unreachable (try another)."""
    code = exc.code()
    return code in RETRYABLE or (
        code == grpc.StatusCode.INTERNAL and exc.details() == _BROKEN_WRITE
    )


def to_error(exc: grpc.aio.AioRpcError) -> DejaqError:
    """The dejaq exception a failed call stands for."""
    code = exc.code()
    detail = exc.details() or code.name
    if retryable(exc) or code == grpc.StatusCode.CANCELLED:
        return BrokerUnavailable(f"broker unavailable: {detail}")
    return error_for(code, detail, kind_in(exc.trailing_metadata()))


class Client:
    """One channel at a time to one of several brokers; moves on when one fails.

    Options:
        brokers: ``"h1:7700,h2:7700"``, a list, or None for ``DEJAQ_BROKER``.
        timeout_s: per-call deadline.
        tls: ``ClientTls(ca, cert, key)``; True for TLS trusting the system's
            roots; False for plaintext; None (default) reads ``DEJAQ_TLS_CA``,
            ``DEJAQ_TLS_CERT``, ``DEJAQ_TLS_KEY`` (plaintext when none is set).
        token: a bearer token; None (default) reads ``DEJAQ_TOKEN``. Sent in
            plaintext only to loopback addresses, otherwise TLS is required.
    """

    def __init__(
        self,
        brokers: str | Sequence[str] | None = None,
        timeout_s: float = 30.0,
        *,
        tls: ClientTls | bool | None = None,
        token: str | None = None,
    ):
        self.addresses = parse_brokers(brokers)
        self.timeout_s = timeout_s
        settings = client_tls() if tls is None else ClientTls() if tls is True else tls or None
        self._dialer = Dialer(self.addresses, settings, client_token(token))
        self._index = 0
        self._generation = 0  # bumped by each failover: which channel a stream was on
        self._channel: grpc.aio.Channel | None = None
        self._stub: pb_grpc.TimelineStub | None = None

    @property
    def address(self) -> str:
        return self.addresses[self._index]

    def stub(self) -> pb_grpc.TimelineStub:
        if self._stub is None:
            self._channel = self._dialer.channel(self.address, options=CHANNEL_OPTIONS)
            self._stub = self._dialer.stub(self._channel)
        return self._stub

    @property
    def generation(self) -> int:
        """Which channel ``stub()`` gives now: a stream notes it when it opens,
        and names it to ``failover`` when it breaks."""
        return self._generation

    async def failover(self, broken: int | None = None) -> None:
        """Drop the current channel and point at the next broker.

        ``broken``: the generation a failed stream was on. The channel is shared,
        so dropping it cancels every other stream on it too; those then open
        again on the channel that replaced it (their generation is gone), rather
        than dropping that one in turn (streams would cancel each other for good)
        or skipping a broker."""
        if broken is not None and broken != self._generation:
            return
        await self._close_channel()
        self._generation += 1
        self._index = (self._index + 1) % len(self.addresses)

    async def call(self, method: str, request: Any, *, idempotent: bool = True) -> Any:
        """A unary call, tried once on every broker while they are unavailable.

        With ``idempotent=False`` the call is only ever sent once: brokers that
        cannot be connected to are skipped, but an UNAVAILABLE after sending is
        raised (see the module's note)."""
        last: DejaqError | None = None
        for _ in range(len(self.addresses)):
            rpc: Callable[..., Awaitable[Any]] = getattr(self.stub(), method)
            if not idempotent and not await self._connected():
                last = BrokerUnavailable(f"broker unavailable: cannot connect to {self.address}")
                await self.failover()
                continue
            try:
                return await rpc(request, timeout=self.timeout_s, wait_for_ready=False)
            except grpc.aio.AioRpcError as exc:
                last = self.explain(to_error(exc))
                if not retryable(exc):
                    raise last from exc
                if not idempotent:
                    raise BrokerUnavailable(
                        f"{method} may or may not have been applied (not retried:"
                        f" it is not idempotent): {last}"
                    ) from exc
                await self.failover()
        assert last is not None
        raise last

    async def _connected(self) -> bool:
        """Connect the current channel; False when it fails or takes too long
        (nothing was sent on it)."""
        self.stub()
        channel = self._channel
        assert channel is not None
        deadline = time.monotonic() + min(CONNECT_TIMEOUT_S, self.timeout_s)
        state = channel.get_state(try_to_connect=True)
        while state != grpc.ChannelConnectivity.READY:
            left = deadline - time.monotonic()
            if state in _UNREACHABLE or left <= 0:
                return False
            try:
                await asyncio.wait_for(channel.wait_for_state_change(state), left)
            except TimeoutError:
                return False
            state = channel.get_state(try_to_connect=True)
        return True

    def explain(self, error: DejaqError) -> DejaqError:
        """``error``, with a hint when a broker's refusal suggests missing TLS settings."""
        # A TLS broker closes a plaintext connection at once, a mutual TLS one a
        # connection without a client certificate: say what may be missing.
        if not isinstance(error, BrokerUnavailable) or "Socket closed" not in str(error):
            return error
        tls = self._dialer.tls
        if tls is None:
            hint = "if the broker serves TLS, give its CA: --tls-ca or DEJAQ_TLS_CA"
        elif not tls.cert:
            hint = "if the broker requires client certificates, give --tls-cert and --tls-key"
        else:
            return error
        return BrokerUnavailable(f"{error} ({hint})")

    async def _close_channel(self) -> None:
        if self._channel is not None:
            await self._channel.close()
        self._channel = None
        self._stub = None

    async def close(self) -> None:
        await self._close_channel()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def channel_dropped() -> bool:
    """Whether the ``CancelledError`` being handled came from the stream's call
    (its channel was closed under it by a failover), not from a cancel of the
    task itself, which must go on."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() == 0


async def first_write(call: grpc.aio.StreamStreamCall, request: Any) -> None:
    """The first write of a new stream. grpc.aio holds a write until its call
    has started, and a call cancelled meanwhile (its channel closed under it, as
    a failover of another stream on the same client does) never starts: the
    write would wait for good. Here it raises ``asyncio.InvalidStateError``, as
    a write to a call that has ended does. (Later writes fail by themselves.)

    A call the broker ended with a status of its own before the write was
    seen through (NOT_FOUND for a topic that does not exist, say: the broker
    answered at once) raises that status as ``grpc.aio.AioRpcError``, as a
    read would: the caller learns what the broker said, not that the stream
    was dropped."""
    writing = asyncio.ensure_future(call.write(request))
    ending = asyncio.ensure_future(call.code())
    try:
        await asyncio.wait((writing, ending), return_when=asyncio.FIRST_COMPLETED)
    finally:
        ending.cancel()
        wrote = writing.done()
        if not wrote:
            writing.cancel()
    if (
        not wrote
        or writing.cancelled()
        or isinstance(writing.exception(), asyncio.InvalidStateError)
    ):
        await _raise_status(call)
        raise asyncio.InvalidStateError("the stream ended before it started")
    writing.result()  # the write's own error, if any


async def _raise_status(call: grpc.aio.StreamStreamCall) -> None:
    """Raise the status ``call`` ended with, if it ended with one other than
    OK or CANCELLED (a channel closed under it)."""
    if not call.done():
        return
    code = await call.code()
    if code in (grpc.StatusCode.OK, grpc.StatusCode.CANCELLED):
        return
    raise grpc.aio.AioRpcError(
        code,
        await call.initial_metadata(),
        await call.trailing_metadata(),
        await call.details(),
    )
