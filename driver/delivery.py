"""The handle a consumer gets for each leased message."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from typing import TYPE_CHECKING, Any

from dejaq.core import headers as header_codec
from dejaq.core.clock import now_ms
from dejaq.core.errors import DejaqError
from dejaq.driver.tracing import current_context_of
from dejaq.proto import dejaq_pb2 as pb

if TYPE_CHECKING:
    from dejaq.driver.settle import SettleBatcher
    from dejaq.driver.tracing import Process


async def _queued() -> None:
    """What an unconfirmed ``ack`` or ``nack`` returns, the settle queued
    already: awaiting it returns at once, never suspends (a coroutine still, so
    ``asyncio.create_task(delivery.ack())`` goes on working)."""


ACK: int = pb.Settle.ACK
NACK: int = pb.Settle.NACK


class Delivery:
    """One leased message: settle it with ``ack``, ``nack`` or ``extend``.

    ``ack`` and ``nack`` return as soon as the settle is queued: settles travel
    grouped, so a loop of ``await delivery.ack()`` runs at full speed. Pass
    ``confirm=True`` to wait for the broker's answer (and get its refusal as an
    exception); otherwise a refusal reaches the consumer's ``on_settle_error``
    and its next ``flush()``. See ``dejaq.driver.settle``.
    """

    __slots__ = (
        "_extending",
        "_headers",
        "_lease_ms",
        "_process",
        "_raw_headers",
        "_settled",
        "_settler",
        "deliveries",
        "id",
        "key",
        "lease_until_ms",
        "payload",
        "priority",
        "received_at_ms",
        "timestamp_ms",
        "version",
    )

    def __init__(
        self,
        id: str,
        timestamp_ms: int,
        payload: bytes,
        version: int,
        deliveries: int,
        lease_until_ms: int,
        received_at_ms: int,
        settler: SettleBatcher,
        lease_ms: int,
        priority: int = 0,
        key: str = "",
        headers: bytes = b"",
    ) -> None:
        self.id = id
        # When it was due; of a priority topic, when it became available.
        self.timestamp_ms = timestamp_ms
        self.payload = payload
        self.version = version  # the version this consumer holds (extend bumps it)
        self.deliveries = deliveries  # 1 on the first delivery
        self.priority = priority  # priority topics; 0 = most urgent (0 on a timeline)
        self.key = key  # "" = none
        # Encoded as they came (core/headers.py): decoded on first read of
        # ``headers``, so a consumer that never reads them builds no dict.
        self._raw_headers = headers
        self._headers: dict[str, str] | None = None
        self.lease_until_ms = lease_until_ms
        self.received_at_ms = received_at_ms
        self._settler = settler
        self._lease_ms = lease_ms  # the consumer's lease: keep_alive's default
        # The extend in flight, if any: the next settle must quote the version it
        # produces, so it waits for the answer (even if the extend's caller was
        # cancelled, as keep_alive's renewer is when its block ends).
        self._extending: asyncio.Future[None] | None = None
        self._settled = False  # acked or nacked: no settle of it is to come
        self._process: Process | None = None  # its span and metrics, while they are on

    def __repr__(self) -> str:
        return (
            f"Delivery(id={self.id!r}, timestamp_ms={self.timestamp_ms}, "
            f"version={self.version}, deliveries={self.deliveries}, priority={self.priority}"
            + (f", key={self.key!r})" if self.key else ")")
        )

    @property
    def headers(self) -> dict[str, str]:
        """The message's headers as the producer set them (empty: none)."""
        h = self._headers
        if h is None:
            h = self._headers = header_codec.decode(self._raw_headers)
        return h

    @property
    def trace_context(self) -> Any:
        """The OpenTelemetry context of this delivery's ``process`` span, to start
        the application's own spans under it (None while tracing is off)."""
        return current_context_of(self._process)

    def ack(self, *, confirm: bool = False) -> Coroutine[Any, Any, None]:
        """Done with it: the message is deleted. Await it: unconfirmed, the ack is
        queued as it is called (an append to the settle frame being gathered)
        and the await returns at once; with ``confirm`` it waits for the
        broker's answer."""
        self._settled = True
        if self._process is not None:
            self._process.end("ack")
            if not confirm and self._extending is None and self._settler.add(ACK, self, 0, True):
                return _queued()
        elif not confirm and self._extending is None and self._settler.add(ACK, self, 0):
            return _queued()
        return self._settle_later(ACK, 0, confirm)

    def nack(self, delay_ms: int = 0, *, confirm: bool = False) -> Coroutine[Any, Any, None]:
        """Give it back, due again in ``delay_ms`` (dead-lettered after max
        deliveries). Await it, as ``ack``."""
        self._settled = True
        process = self._process
        traced = process is not None
        if process is not None:
            process.end("nack")
        if (
            not confirm
            and self._extending is None
            and self._settler.add(NACK, self, delay_ms, traced)
        ):
            return _queued()
        return self._settle_later(NACK, delay_ms, confirm)

    async def _settle_later(self, kind: int, ms: int, confirm: bool) -> None:
        """A settle that waits: for an extend in flight, for room, or for its answer."""
        if self._extending is not None:
            await self._after_extend()
        await self._settler.settle(kind, self, ms, confirm)

    async def extend(self, lease_ms: int) -> None:
        """Hold it ``lease_ms`` longer from now. Waits for the broker's answer: the
        next settle must quote the version the extend produced. Cancelling the
        caller does not cancel the extend in flight: the settles after it still
        wait for its answer and quote its version."""
        await self._after_extend()
        extending = asyncio.ensure_future(
            self._settler.settle(pb.Settle.EXTEND, self, lease_ms, True)
        )
        self._extending = extending
        try:
            await asyncio.shield(extending)
        finally:
            if extending.done() and self._extending is extending:
                self._extending = None
        self.lease_until_ms = now_ms() + lease_ms

    async def _after_extend(self) -> None:
        """Wait for the extend in flight (its outcome is its caller's to raise)."""
        extending = self._extending
        if extending is not None and not extending.done():
            await asyncio.wait([extending])
        if extending is not None and extending.done():
            if not extending.cancelled():
                extending.exception()  # retrieved: its caller may have been cancelled
            if self._extending is extending:
                self._extending = None

    @contextlib.asynccontextmanager
    async def keep_alive(self, lease_ms: int | None = None) -> AsyncIterator[Delivery]:
        """Extend the lease (by ``lease_ms``, default the consumer's lease) every half
        lease while the block runs. An extend still in flight when the block ends
        is not lost: an ``ack`` or ``nack`` right after waits for its answer and
        quotes the version it produced."""
        lease = lease_ms or self._lease_ms

        async def renew() -> None:
            while True:
                await asyncio.sleep(lease / 2000)
                await self.extend(lease)

        task = asyncio.create_task(renew())
        try:
            yield self
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, DejaqError):
                await task
