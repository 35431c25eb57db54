"""The consumer: an async iterator (or a callback loop) over deliveries.

Flow control: the broker sends at most ``credits`` deliveries ahead; a credit
goes back each time the application takes a delivery, in batches of about a
quarter window. Settles (ack / extend / nack) made in the same event-loop turn
travel in one frame and each awaits the broker's confirmation.

``close()`` is a clean goodbye: pending settles are flushed and a Goodbye
frame makes the broker release this consumer's remaining leases at once. If
the broker goes away the consumer reconnects (to the next broker of its list)
under the same consumer id, so the leases it holds stay ackable.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import grpc

from dejaq.core.clock import now_ms
from dejaq.core.errors import AlreadyExists, BrokerUnavailable, DejaqError
from dejaq.core.wire.batches import decode_deliveries
from dejaq.core.wire.status import error_for, status_code
from dejaq.driver.client import Client, to_error
from dejaq.proto import dejaq_pb2 as pb

log = logging.getLogger(__name__)
_END = object()


@dataclass(eq=False)
class Delivery:
    """One leased message. Settle it with ``ack``, ``nack`` or ``extend``."""

    id: str
    timestamp_ms: int  # when it was due
    payload: bytes
    version: int
    deliveries: int
    lease_until_ms: int
    received_at_ms: int
    _consumer: Consumer = field(repr=False)

    async def ack(self) -> None:
        await self._consumer._settle(pb.Settle.ACK, self, 0)

    async def nack(self, delay_ms: int = 0) -> None:
        """Give it back, due again in ``delay_ms``."""
        await self._consumer._settle(pb.Settle.NACK, self, delay_ms)

    async def extend(self, lease_ms: int) -> None:
        """Hold it ``lease_ms`` longer from now."""
        await self._consumer._settle(pb.Settle.EXTEND, self, lease_ms)
        self.lease_until_ms = now_ms() + lease_ms

    @contextlib.asynccontextmanager
    async def keep_alive(self, lease_ms: int | None = None) -> AsyncIterator[Delivery]:
        """Extend the lease every half lease while the block runs."""
        lease = lease_ms or self._consumer.lease_ms

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


class Consumer:
    def __init__(
        self,
        client: Client,
        topic: str,
        *,
        consumer_id: str = "",
        lease_ms: int = 0,
        credits: int = 100,
        retry_timeout_s: float = 30.0,
    ) -> None:
        self.client = client
        self.topic = topic
        self.consumer_id = consumer_id
        self.lease_ms = lease_ms
        self.window = credits
        self.retry_timeout_s = retry_timeout_s
        self._buffer: asyncio.Queue[Delivery | object] = asyncio.Queue()
        self._call: grpc.aio.StreamStreamCall | None = None
        self._reader: asyncio.Task[None] | None = None
        self._returned = 0  # credits taken but not yet sent back
        self._tokens = itertools.count(1)
        self._waiting: dict[int, tuple[list[Delivery], asyncio.Future[pb.SettleResult]]] = {}
        self._pending: dict[tuple[int, int], list[tuple[Delivery, asyncio.Future[None]]]] = {}
        self._flush_scheduled = False
        self._closing = False
        self._error: DejaqError | None = None
        # (frame, settle future); a None frame means "half-close the stream".
        self._outbox: asyncio.Queue[
            tuple[pb.ConsumeRequest | None, asyncio.Future[pb.SettleResult] | None]
        ] = asyncio.Queue()
        self._writer: asyncio.Task[None] | None = None

    # -- life cycle -----------------------------------------------------------

    async def start(self) -> Consumer:
        """Open the stream; raises if the topic is unknown or the hello is refused."""
        await self._connect(self.window)
        return self

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Leave cleanly: flush settles, half-close; the broker releases our leases."""
        if self._closing:
            return
        self._closing = True
        self._flush_settles()
        if self._waiting:
            with contextlib.suppress(DejaqError, asyncio.CancelledError):
                await asyncio.wait_for(
                    asyncio.gather(*(f for _, f in self._waiting.values()), return_exceptions=True),
                    self.client.timeout_s,
                )
        call = self._call
        if call is not None:
            # After what is queued: Goodbye (the broker releases our leases), half-close.
            self._outbox.put_nowait((pb.ConsumeRequest(goodbye=pb.Goodbye()), None))
            self._outbox.put_nowait((None, None))
            if self._writer is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await self._writer
            if self._reader is not None:
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(self._reader), self.client.timeout_s)
                self._reader.cancel()
        self._buffer.put_nowait(_END)

    # -- receiving ------------------------------------------------------------

    def __aiter__(self) -> AsyncIterator[Delivery]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Delivery]:
        if self._call is None and not self._closing:
            await self.start()
        while True:
            item = await self._buffer.get()
            if item is _END:
                self._buffer.put_nowait(_END)  # later iterators end too
                if self._error is not None:
                    raise self._error
                return
            assert isinstance(item, Delivery)
            self._credit_back(1)
            yield item

    async def run(
        self, handler: Callable[[Delivery], Awaitable[None]], *, auto_ack: bool = True
    ) -> None:
        """Call ``handler`` for each delivery; with ``auto_ack`` ack on return and
        nack (due again at once) when it raises. Settles are not awaited one by
        one: those made in one event-loop turn share a frame."""
        settling: set[asyncio.Task[None]] = set()
        async for delivery in self:
            try:
                await handler(delivery)
                settle = delivery.ack() if auto_ack else None
            except Exception:
                log.exception("handler failed for message %s", delivery.id)
                settle = delivery.nack() if auto_ack else None
            if settle is not None:
                task = asyncio.ensure_future(settle)
                settling.add(task)
                task.add_done_callback(settling.discard)
                task.add_done_callback(_log_settle_failure)
        if settling:
            await asyncio.wait(settling)

    # -- settling -------------------------------------------------------------

    async def _settle(self, kind: int, d: Delivery, ms: int) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.setdefault((kind, ms), []).append((d, fut))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush_settles)
        await fut

    def _flush_settles(self) -> None:
        self._flush_scheduled = False
        pending, self._pending = self._pending, {}
        for (kind, ms), items in pending.items():
            token = next(self._tokens)
            frame = pb.Settle(
                kind=kind,  # type: ignore[arg-type]
                ids=[d.id for d, _ in items],
                versions=[d.version for d, _ in items],
                ms=ms,
                token=token,
            )
            done: asyncio.Future[pb.SettleResult] = asyncio.get_running_loop().create_future()
            self._waiting[token] = ([d for d, _ in items], done)
            done.add_done_callback(lambda f, its=items: _settled(f, its))  # type: ignore[misc]
            self._send(pb.ConsumeRequest(settle=frame), done)

    def _credit_back(self, n: int) -> None:
        self._returned += n
        if self._returned >= max(1, self.window // 4) or self._buffer.empty():
            credits, self._returned = self._returned, 0
            self._send(pb.ConsumeRequest(credits=credits), None)

    def _send(self, req: pb.ConsumeRequest, fut: asyncio.Future[pb.SettleResult] | None) -> None:
        if self._call is None:
            if fut is not None and not fut.done():
                fut.set_exception(BrokerUnavailable("consumer is not connected"))
            return
        self._outbox.put_nowait((req, fut))

    async def _write(self, call: grpc.aio.StreamStreamCall) -> None:
        """The one writer of a stream: gRPC allows a single write in flight."""
        while True:
            req, fut = await self._outbox.get()
            try:
                if req is None:
                    await call.done_writing()
                    return
                await call.write(req)
            except (grpc.RpcError, asyncio.InvalidStateError) as exc:
                if fut is not None and not fut.done():
                    fut.set_exception(BrokerUnavailable(f"settle not sent: {exc}"))
                return

    # -- the stream -----------------------------------------------------------

    async def _connect(self, credits: int) -> None:
        hello = pb.Hello(
            topic=self.topic,
            consumer_id=self.consumer_id,
            lease_ms=self.lease_ms,
            credits=max(1, credits),
        )
        call = self.client.stub().Consume()
        try:
            await call.write(pb.ConsumeRequest(hello=hello))
            first = await call.read()
        except grpc.aio.AioRpcError as exc:
            raise to_error(exc) from exc
        if first is grpc.aio.EOF or first.WhichOneof("frame") != "welcome":
            raise BrokerUnavailable("the broker did not welcome the consumer")
        self.consumer_id = first.welcome.consumer_id
        self.lease_ms = first.welcome.lease_ms
        self._call = call
        if self._writer is not None:
            self._writer.cancel()
        self._writer = asyncio.create_task(self._write(call))
        self._reader = asyncio.create_task(self._read(call))

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        try:
            while True:
                frame = await call.read()
                if frame is grpc.aio.EOF:
                    break
                self._on_frame(frame)
        except grpc.aio.AioRpcError as exc:
            error = to_error(exc)
            # While closing, a broken stream is just the end of it.
            if not self._closing and isinstance(error, BrokerUnavailable):
                self._fail_waiting(error)
                await self._reconnect()
                return
            if not self._closing:
                self._error = error
        self._fail_waiting(BrokerUnavailable("consume stream ended"))
        self._call = None
        self._buffer.put_nowait(_END)

    def _on_frame(self, frame: pb.ConsumeResponse) -> None:
        kind = frame.WhichOneof("frame")
        if kind == "deliveries":
            received = now_ms()
            batch, lease_until = decode_deliveries(frame.deliveries)
            for d in batch:
                self._buffer.put_nowait(
                    Delivery(
                        d.id,
                        d.timestamp,
                        d.payload,
                        d.version,
                        d.deliveries,
                        lease_until,
                        received,
                        self,
                    )
                )
        elif kind == "settled":
            entry = self._waiting.pop(frame.settled.token, None)
            if entry is not None and not entry[1].done():
                entry[1].set_result(frame.settled)

    def _fail_waiting(self, error: DejaqError) -> None:
        waiting, self._waiting = self._waiting, {}
        for _, fut in waiting.values():
            if not fut.done():
                fut.set_exception(error)

    async def _reconnect(self) -> None:
        """Reconnect under the same consumer id; deliveries already buffered stay valid."""
        self._call = None
        deadline = time.monotonic() + self.retry_timeout_s
        attempt = 0
        while not self._closing:
            await self.client.failover()
            try:
                await self._connect(self.window - self._buffer.qsize())
                log.info("consumer %s reconnected to %s", self.consumer_id, self.client.address)
                return
            except (BrokerUnavailable, AlreadyExists) as exc:
                if time.monotonic() > deadline:
                    self._error = BrokerUnavailable(f"consumer could not reconnect: {exc}")
                    break
            except DejaqError as exc:
                self._error = exc
                break
            await asyncio.sleep(min(1.0, 0.05 * 2**attempt))
            attempt += 1
        self._buffer.put_nowait(_END)


def _log_settle_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("settle failed: %s", task.exception())


def _settled(
    done: asyncio.Future[pb.SettleResult],
    items: list[tuple[Delivery, asyncio.Future[None]]],
) -> None:
    if done.cancelled():
        for _, fut in items:
            fut.cancel()
        return
    exc = done.exception()
    if exc is not None:
        for _, fut in items:
            if not fut.done():
                fut.set_exception(exc)
        return
    result = done.result()
    rejected = {r.index: r for r in result.rejections}
    for n, (d, fut) in enumerate(items):
        if fut.done():
            continue
        r = rejected.get(n)
        if r is not None:
            fut.set_exception(error_for(status_code(r.code), r.reason))
        else:
            d.version = result.versions[n]
            fut.set_result(None)
