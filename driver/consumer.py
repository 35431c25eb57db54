"""The consumer: an async iterator (or a handler loop) over deliveries.

Flow control: the broker sends at most ``credits`` deliveries ahead; credits go
back as the application takes deliveries, riding on the next settle frame.

Sent ahead of time: the consumer asks the broker (``hold_ms``) to send messages
up to that many ms before they are due, and holds each until the broker's clock
reaches its timestamp (``dejaq.driver.hold``): the application never gets a
message early, and a broker busy for a few ms makes none late.

Settles are grouped (``dejaq.driver.settle``): ``await delivery.ack()`` returns
once the ack is queued, and everything queued in one event-loop turn leaves in
one frame. ``flush()`` waits for the broker's answers and raises refusals;
``close()`` stops handing out deliveries, lets the ones being processed finish
(a task that took a delivery is processing it until it acks or nacks it or
comes back for the next one, as ``run()``'s handlers and an ``async for`` loop
in another task do), up to ``close_timeout_s``, flushes, then says Goodbye so
the broker releases this consumer's remaining leases at once. If some are
still processed at the bound, the Goodbye names them and the broker releases
nothing: their leases run out at their own time (at-least-once), never handed
to another consumer while an ack may still come. If the broker goes away the
consumer reconnects (to the next broker of its list) under the same consumer
id, so the leases it holds stay ackable; settles queued meanwhile wait for the
new stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc

from dejaq.core.clock import now_ms
from dejaq.core.errors import AlreadyExists, BrokerUnavailable, DejaqError
from dejaq.core.wire.batches import decode_delivery_columns
from dejaq.driver.backoff import Backoff
from dejaq.driver.batch import DeliveryBatch, Frame
from dejaq.driver.client import Client, channel_dropped, first_write, to_error
from dejaq.driver.delivery import Delivery
from dejaq.driver.fair_buffer import FairBuffer
from dejaq.driver.hold import Hold
from dejaq.driver.settle import OnError, SettleBatcher
from dejaq.driver.tracing import ConsumeTrace, SettleTrace, meter, tracer
from dejaq.proto import dejaq_pb2 as pb

log = logging.getLogger(__name__)

Handler = Callable[[Delivery], Awaitable[None]]
# What a task took last: a delivery, those ``ready()`` gave, or a batch.
Taken = Delivery | list[Delivery] | DeliveryBatch
SETTLED_LOOK_S = 0.05  # close(): how often to look for deliveries settled meanwhile
PRUNE_AT = 64  # tasks that took deliveries, before ended ones are dropped
# How early a broker may send a message, held until due (hold.py); the broker
# sends at most its own --send-ahead-ms early.
HOLD_MS = 1000
# Deliveries handed out from the buffer before the consumer lets the event loop
# run once (a few µs): the stream's reader, the hold's timer and the settle
# writer then run every ~2 ms at 30k deliveries a second.
YIELD_EVERY = 64


class Consumer:
    """Receives a topic's due messages from a broker.

    Options:
        consumer_id: a stable id (reconnects and leases use it); default generated.
        lease_ms: lease per delivery; default the topic's.
        credits: how many deliveries the broker may send ahead (default 2048).
        retry_timeout_s: how long to keep reconnecting after a broker is lost
            (``math.inf``: until closed). Each outage is logged once, as a
            warning, when it begins.
        on_settle_error: called with a ``SettleFailure`` for each unconfirmed
            settle the broker refused; default a warning in the log.
        max_settle_batch: ids per settle frame at most (default 1000).
        settle_linger_ms: how long a settle may wait for others to share its
            frame (default 50 ms: a frame costs a consumer as much CPU as a
            few hundred deliveries, and its credits wake the broker for a
            pass); a settle with ``confirm=True`` leaves at once.
        close_timeout_s: how long ``close()`` waits for deliveries still being
            processed (default the client's timeout).
        hold_ms: how early the broker may send a message, which the consumer
            then holds until it is due by the broker's clock (default 1000; the
            broker sends at most its ``--send-ahead-ms`` early, 100 ms or 200
            on PostgreSQL; 0: the broker holds each message and sends it at
            its millisecond).

    Use ``async with Consumer(...) as c: async for d in c: ...; await d.ack()``,
    or ``await c.run(handler, concurrency=N)``.
    """

    def __init__(
        self,
        client: Client,
        topic: str,
        *,
        consumer_id: str = "",
        lease_ms: int = 0,
        credits: int = 2048,
        retry_timeout_s: float = 30.0,
        on_settle_error: OnError | None = None,
        max_settle_batch: int = 1000,
        settle_linger_ms: float = 50.0,
        close_timeout_s: float | None = None,
        hold_ms: int = HOLD_MS,
    ) -> None:
        if hold_ms < 0:
            raise ValueError("hold_ms cannot be negative")
        self.client = client
        self.topic = topic
        self.consumer_id = consumer_id
        self.lease_ms = lease_ms
        self.window = credits
        self.retry_timeout_s = retry_timeout_s
        # Deliveries taken from the stream, not yet by the application. A deque
        # and an event: an asyncio.Queue costs several microseconds a message.
        self._buffer: FairBuffer[Delivery] = FairBuffer()
        self._streak = 0  # deliveries handed out since the loop last yielded
        self.hold_ms = hold_ms
        self._early = Hold(self._released)  # sent ahead, not due yet
        self._ended = False
        # The receives waiting, each on its own future (one cancelled or timed out
        # leaves the others be), all woken when deliveries arrive or the stream
        # ends: an asyncio.Event costs a coroutine and a running-loop lookup (a
        # system call) a wait, a thousand a second when held deliveries come due.
        self._waiting: list[asyncio.Future[None]] = []
        self._call: grpc.aio.StreamStreamCall | None = None
        self._reader: asyncio.Task[None] | None = None
        self._writer: asyncio.Task[None] | None = None
        # Frames to write, in order; None means "half-close the stream".
        self._outbox: asyncio.Queue[pb.ConsumeRequest | None] = asyncio.Queue()
        self._settler = SettleBatcher(
            self._send,
            max_batch=max_settle_batch,
            linger_ms=settle_linger_ms,
            on_error=on_settle_error,
            trace=SettleTrace(topic, lambda: self.client.address),
        )
        # Spans and metrics of the deliveries taken: set per delivery frame while
        # they are on, None (no work a delivery) while off.
        self._trace: ConsumeTrace | None = None
        self._settler.set_window(credits)
        self._closing = False
        self._closed: asyncio.Future[None] | None = None  # done when close() is
        self._error: DejaqError | None = None
        self.close_timeout_s = close_timeout_s
        # The delivery each task took last, until it comes back for the next one:
        # it is processing it (close() lets it finish).
        self._processing: dict[asyncio.Task[Any], Taken] = {}
        self._done_processing: asyncio.Event | None = None
        self._prune_at = PRUNE_AT
        # The loop the stream runs on, set by start(): current_task(loop) costs a
        # fifth of current_task(), which looks the running loop up (a receive each).
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- life cycle -----------------------------------------------------------

    async def start(self) -> Consumer:
        """Open the stream, on the first broker of the client's list that takes
        it (one that is down or not serving is skipped for the next); raises if
        the topic is unknown, the hello is refused, or no broker takes it."""
        for left in range(len(self.client.addresses) - 1, -1, -1):
            generation = self.client.generation
            try:
                await self._connect(self.window)
                return self
            except BrokerUnavailable:
                if not left:
                    raise
                await self.client.failover(generation)
        return self

    async def __aenter__(self) -> Consumer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def flush(self, timeout_s: float | None = None) -> None:
        """Send queued settles and wait for the broker's answers to every settle
        made so far; raise ``SettleRejected`` for those it refused since the last
        flush."""
        await self._settler.flush(timeout_s or self.client.timeout_s)

    async def close(self, *, processing: Sequence[Delivery] = ()) -> None:
        """Leave cleanly: stop handing out deliveries, let those being processed
        by other tasks finish (up to ``close_timeout_s``), flush settles, say
        Goodbye (the broker releases our remaining leases, but none still being
        processed), half-close. Refusals found while flushing are logged.

        ``processing``: deliveries the caller knows are still being processed
        outside this event loop (another thread): not released either."""
        if self._closed is not None:
            # Closing already (another task, or ``async with`` after a close() from
            # elsewhere): wait for that close, so what comes next (closing the
            # Client) does not cut its flush and Goodbye short. This task is not
            # processing anything the first close should wait for.
            self._came_back(asyncio.current_task())
            await asyncio.shield(self._closed)
            return
        self._closed = asyncio.get_running_loop().create_future()
        try:
            await self._close(processing)
        finally:
            self._closed.set_result(None)

    async def _close(self, processing: Sequence[Delivery]) -> None:
        self._closing = True
        self._arrived()  # a task waiting in receive() gets None now
        if self._call is not None:
            in_hand = await self._let_processing_finish()
            in_hand += [d for d in processing if not d._settled]
            with contextlib.suppress(DejaqError, TimeoutError):
                await self._settler.flush(self.client.timeout_s)
            for failure in self._settler.take_failures():
                log.warning("%s of %s refused: %s", failure.kind, failure.id, failure.error)
            if in_hand:
                log.warning(
                    "consumer %s closed with %d deliveries still being processed: their"
                    " leases run out at their own time, their settles are refused",
                    self.consumer_id,
                    len(in_hand),
                )
            # Messages sent ahead and held are due within the send-ahead: once they are,
            # the broker may release them with the rest (due now is never early).
            await asyncio.sleep(self._early.last_release_s())
            goodbye = pb.Goodbye(keep=[d.id for d in in_hand])
            self._outbox.put_nowait(pb.ConsumeRequest(goodbye=goodbye))
            self._outbox.put_nowait(None)
            if self._writer is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await self._writer
            if self._reader is not None:
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(asyncio.shield(self._reader), self.client.timeout_s)
                self._reader.cancel()
        self._settler.abandon(BrokerUnavailable("the consumer is closed"))
        # The process spans of other tasks' deliveries end with the consumer; the
        # closing task's own go on until it settles them.
        me = asyncio.current_task()
        for task, taken in self._processing.items():
            if task is me:
                continue
            for d in _built(taken):
                if d._process is not None:
                    d._process.end("closed")
        self._buffer.clear()  # their leases were handed back with the goodbye
        self._early.clear()
        self._end()

    async def _let_processing_finish(self) -> list[Delivery]:
        """Wait until every other task that took a delivery settled it or came back
        for the next (or ended), at most ``close_timeout_s``; the deliveries still
        in hand, unsettled."""
        timeout = self.close_timeout_s
        deadline = time.monotonic() + (self.client.timeout_s if timeout is None else timeout)
        me = asyncio.current_task()
        while True:
            busy = [
                d
                for task, taken in list(self._processing.items())
                if task is not me and not task.done()
                for d in _unsettled(taken)
            ]
            left = deadline - time.monotonic()
            if not busy or left <= 0:
                return busy
            # Woken when a task comes back; a settle without coming back is seen
            # at the next look.
            event = self._done_processing = asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), min(left, SETTLED_LOOK_S))

    def _hold(self, task: asyncio.Task[Any], taken: Taken) -> None:
        """``task`` took ``taken``. Tasks that ended without coming back are dropped
        now and then (each time the map has doubled), so it stays as small as
        the number of tasks taking deliveries."""
        processing = self._processing
        if len(processing) >= self._prune_at:
            for ended in [t for t in processing if t.done()]:
                del processing[ended]
            self._prune_at = max(PRUNE_AT, 2 * len(processing))
        processing[task] = taken

    def _came_back(self, task: asyncio.Task[Any] | None) -> None:
        """``task`` is done with what it took before."""
        if task is None:
            return
        taken = self._processing.pop(task, None)
        if taken is not None:
            for d in _built(taken):
                if d._process is not None:
                    d._process.end("next")
            event = self._done_processing
            if event is not None:
                event.set()

    @property
    def held(self) -> int:
        """Deliveries the broker sent ahead of their time, held until they are due."""
        return len(self._early)

    # -- receiving ------------------------------------------------------------

    def __aiter__(self) -> Consumer:
        return self

    async def __anext__(self) -> Delivery:
        # The consumer is its own iterator, not an async generator over
        # ``receive``: a delivery ready in the buffer is handed out with no
        # generator step, no second coroutine and no suspension.
        d = self._ready()
        if d is None:
            if self._reader is None and not self._closing:
                await self.start()  # never started (a reconnect is not a start)
            d = await self._receive_waiting(None)
            if d is None:
                raise StopAsyncIteration
        return d

    async def receive(self, timeout_s: float | None = None) -> Delivery | None:
        """The next delivery, or None once the consumer is closed (raises the
        error that ended the stream, if any); ``TimeoutError`` when ``timeout_s``
        passes without one. Once ``close()`` began it returns None: what is still
        buffered is handed back with the Goodbye."""
        d = self._ready()
        if d is None:
            d = await self._receive_waiting(timeout_s)
        return d

    def _ready(self) -> Delivery | None:
        """The next delivery when one is buffered and the loop need not yield
        first (None: ``_receive_waiting`` takes it). The calling task is done
        with what it took before either way."""
        task = asyncio.current_task(self._loop)
        processing = self._processing
        if processing:
            taken = processing.get(task)  # type: ignore[arg-type]
            if taken is not None and (
                type(taken) is not Delivery
                or taken._process is not None
                or self._done_processing is not None
            ):
                self._came_back(task)
        if not self._buffer or self._closing:
            return None
        streak = self._streak + 1
        if streak >= YIELD_EVERY:
            return None
        self._streak = streak
        return self._take(task)

    async def _receive_waiting(self, timeout_s: float | None) -> Delivery | None:
        """``receive`` when ``_ready`` had none to give at once."""
        if self._buffer and not self._closing:
            # A loop that finds a delivery ready every time never yields:
            # frames (a due reminder behind a campaign), held deliveries
            # coming due and settles would wait until the buffer ran dry.
            self._streak = 0
            await asyncio.sleep(0)
        if (not self._buffer or self._closing) and not await self._wait_ready(timeout_s):
            return None
        return self._take(asyncio.current_task(self._loop))

    def _take(self, task: asyncio.Task[Any] | None) -> Delivery:
        """Hand the buffer's next delivery to ``task``."""
        d = self._buffer.popleft()
        self._settler.credit(1)
        if task is not None:
            processing = self._processing
            if len(processing) < self._prune_at:
                processing[task] = d  # in place of the one it took before
            else:
                self._hold(task, d)
        if self._trace is not None:
            self._taken(self._trace, d)
        return d

    async def _wait_ready(self, timeout_s: float | None) -> bool:
        """Wait until a delivery is buffered (True), or the consumer is closing or
        ended (False; raises the error that ended the stream, if any)."""
        while not self._buffer or self._closing:
            if self._ended or self._closing:
                if self._error is not None:
                    raise self._error
                return False
            # Held deliveries whose time came while this loop was busy go now,
            # rather than after a turn of the loop for their timer and another
            # for this task.
            if self._early.release_due():
                continue
            waiter = (self._loop or asyncio.get_running_loop()).create_future()
            waiting = self._waiting
            waiting.append(waiter)
            try:
                if timeout_s is None:
                    await waiter
                else:
                    await asyncio.wait_for(waiter, timeout_s)
            finally:
                if waiter.cancelled() and waiter in waiting:
                    waiting.remove(waiter)
            self._streak = 0
        return True

    def batches(self) -> AsyncIterator[DeliveryBatch]:
        """The deliveries in batches, as they are ready: ``async for batch in
        consumer.batches(): ...; await batch.ack_all()``. A batch is a sequence
        of ``Delivery`` (each built when first touched) with ``ids``,
        ``timestamps`` and ``payloads`` read from its columns; ``ack_all()`` and
        ``nack_all(delay_ms)`` settle what it holds not settled yet. Messages of
        several keys come in one batch, round the keys (as ``async for`` hands
        them out)."""
        return self._iterate_batches()

    async def _iterate_batches(self) -> AsyncIterator[DeliveryBatch]:
        if self._reader is None and not self._closing:  # never started; a reconnect is not a start
            await self.start()
        while (batch := await self.receive_batch()) is not None:
            yield batch

    async def receive_batch(self, timeout_s: float | None = None) -> DeliveryBatch | None:
        """The deliveries ready now, at least one, as a batch (waiting for one);
        None once the consumer is closed, as ``receive``."""
        task = asyncio.current_task(self._loop)
        if self._processing:
            self._came_back(task)
        if self._buffer:
            # Ready at once: let the stream's reader, the hold's timer and the
            # settle writer run first, as ``receive`` does every YIELD_EVERY.
            await asyncio.sleep(0)
        if not await self._wait_ready(timeout_s):
            return None
        taken = self._buffer.take_batch()
        batch = taken if isinstance(taken, DeliveryBatch) else DeliveryBatch.of(list(taken))
        self._settler.credit(len(batch))
        if task is not None:
            self._hold(task, batch)
        if self._trace is not None:
            for d in batch:
                self._taken(self._trace, d)
        return batch

    def _taken(self, trace: ConsumeTrace, d: Delivery) -> None:
        """The application took ``d``: its process span and metrics start."""
        d._process = trace.taken(
            d.id,
            d.timestamp_ms,
            d.deliveries,
            d.key,
            d.headers if d._raw_headers else None,
            now_ms(),
        )

    def ready(self) -> list[Delivery]:
        """Take every delivery already buffered, without waiting (maybe none)."""
        if self._processing:
            self._came_back(asyncio.current_task())
        if self._closing:
            return []
        out = self._buffer.drain()
        if out:
            self._settler.credit(len(out))
            task = asyncio.current_task()
            if task is not None:
                self._hold(task, out)
            if self._trace is not None:
                for d in out:
                    self._taken(self._trace, d)
        return out

    def _released(self, deliveries: Sequence[Delivery]) -> None:
        """Held deliveries that are due now."""
        received = now_ms()
        if isinstance(deliveries, DeliveryBatch):  # a stretch of one frame
            deliveries.received_at_ms = received
            self._buffer_batch(deliveries)
        else:
            for d in deliveries:
                d.received_at_ms = received
            self._buffer.extend(deliveries)
        self._arrived()

    def _buffer_batch(self, batch: DeliveryBatch) -> None:
        """A stretch of a frame joins the buffer, nothing built: as one run
        without keys, or with its keys (fair_buffer.py)."""
        keys = batch.keys
        if keys is None or not any(keys):
            self._buffer.add_run("", batch, batch.build)
        else:
            self._buffer.add_keyed(batch, keys, batch.build)

    def _arrived(self) -> None:
        """Wake every receive waiting."""
        waiting = self._waiting
        if waiting:
            for waiter in waiting:
                if not waiter.done():
                    waiter.set_result(None)
            waiting.clear()

    def _end(self) -> None:
        self._ended = True
        self._arrived()

    async def run(self, handler: Handler, *, auto_ack: bool = True, concurrency: int = 1) -> None:
        """Call ``handler`` for each delivery, ``concurrency`` at a time (for handlers
        that do I/O). With ``auto_ack`` a delivery is acked when its handler returns
        and nacked (due again at once) when it raises. Returns when the consumer is
        closed, after flushing settles."""
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if self._reader is None and not self._closing:  # never started; a reconnect is not a start
            await self.start()

        async def work() -> None:
            while (d := await self.receive()) is not None:
                try:
                    await handler(d)
                except Exception as exc:
                    log.exception("handler failed for message %s", d.id)
                    if d._process is not None:
                        d._process.failed(exc)
                    if auto_ack:
                        await d.nack()
                    continue
                if auto_ack:
                    await d.ack()

        await asyncio.gather(*(work() for _ in range(concurrency)))
        with contextlib.suppress(DejaqError, TimeoutError):
            await self._settler.flush(self.client.timeout_s)

    # -- sending --------------------------------------------------------------

    def _send(self, req: pb.ConsumeRequest) -> bool:
        if self._call is None:
            return False
        self._outbox.put_nowait(req)
        return True

    async def _write(self, call: grpc.aio.StreamStreamCall) -> None:
        """The one writer of a stream: gRPC allows a single write in flight."""
        while True:
            req = await self._outbox.get()
            try:
                if req is None:
                    await call.done_writing()
                    return
                await call.write(req)
            except (grpc.RpcError, asyncio.InvalidStateError):
                return  # the reader sees the broken stream and reconnects

    # -- the stream -----------------------------------------------------------

    async def _connect(self, credits: int) -> None:
        hello = pb.Hello(
            topic=self.topic,
            consumer_id=self.consumer_id,
            lease_ms=self.lease_ms,
            credits=max(1, credits),
            hold_ms=self.hold_ms,
        )
        generation = self.client.generation
        self._loop = asyncio.get_running_loop()
        call = self.client.stub().Consume()
        try:
            await first_write(call, pb.ConsumeRequest(hello=hello))
            first = await call.read()
        except grpc.aio.AioRpcError as exc:
            raise to_error(exc) from exc
        except asyncio.InvalidStateError:
            raise BrokerUnavailable("the consume stream's channel was dropped") from None
        except asyncio.CancelledError:
            if not channel_dropped():
                raise
            raise BrokerUnavailable("the consume stream's channel was dropped") from None
        if first is grpc.aio.EOF or first.WhichOneof("frame") != "welcome":
            raise BrokerUnavailable("the broker did not welcome the consumer")
        self.consumer_id = first.welcome.consumer_id
        self.lease_ms = first.welcome.lease_ms
        self._outbox = asyncio.Queue()  # frames for a dead stream are not resent
        self._call = call
        if self._writer is not None:
            self._writer.cancel()
        self._writer = asyncio.create_task(self._write(call))
        self._reader = asyncio.create_task(self._read(call, generation))
        self._settler.forget_credits()
        self._settler.holding = False
        self._settler.send_now()

    async def _read(self, call: grpc.aio.StreamStreamCall, generation: int) -> None:
        """The one reader of ``call``. Should it fail in a way none of the paths
        of ``_read_frames`` expects, the consumer ends with that error (logged)
        rather than waiting for good on a stream nobody reads."""
        try:
            await self._read_frames(call, generation)
        except Exception as exc:
            log.exception("consume stream to %s: reading it failed", self.client.address)
            call.cancel()
            if not self._closing:
                self._error = BrokerUnavailable(f"the consume stream broke: {exc!r}")
            self._stream_ended()

    async def _read_frames(self, call: grpc.aio.StreamStreamCall, generation: int) -> None:
        try:
            while True:
                frame = await call.read()
                if frame is grpc.aio.EOF:
                    break
                self._on_frame(frame)
        except (grpc.aio.AioRpcError, asyncio.CancelledError) as exc:
            if isinstance(exc, asyncio.CancelledError):
                if not channel_dropped():
                    raise
                error: DejaqError = BrokerUnavailable("the consume stream's channel was dropped")
            else:
                error = to_error(exc)
            # While closing, a broken stream is just the end of it.
            if not self._closing and isinstance(error, BrokerUnavailable):
                self._settler.lost(error)
                await self._reconnect(generation, error)
                return
            if not self._closing:
                self._error = error
        self._stream_ended()

    def _stream_ended(self) -> None:
        """No stream any more, nor one to come: settles not sent are given up."""
        self._call = None
        self._settler.abandon(BrokerUnavailable("consume stream ended"))
        self._end()

    def _on_frame(self, frame: pb.ConsumeResponse) -> None:
        kind = frame.WhichOneof("frame")
        if kind == "deliveries":
            self._trace = self._tracing()
            received = now_ms()
            c = decode_delivery_columns(frame.deliveries)
            if not c.ids:
                return
            # Kept as columns: a delivery object is built as the application
            # takes each; the buffer reads the keys column to hand them out
            # round the keys (fair_buffer.py).
            batch = DeliveryBatch(Frame(c, self._settler, self.lease_ms), 0, len(c.ids), received)
            sent_at = frame.sent_at
            if sent_at and (self._early.holding or max(c.timestamps) > sent_at):
                # Sent ahead, or behind held ones that may be due by now: the hold
                # releases what is due in due order.
                self._early.add(batch, c.timestamps, sent_at)
            else:  # all due when the broker sent them
                self._buffer_batch(batch)
                self._arrived()
        elif kind == "settled":
            self._settler.answered(frame.settled)

    def _tracing(self) -> ConsumeTrace | None:
        """What traces the deliveries of a frame; None while tracing and metrics are off."""
        t, instruments = tracer(), meter()
        if t is None and instruments is None:
            return None
        trace = self._trace
        if trace is not None and trace.tracer is t and trace.instruments is instruments:
            return trace
        return ConsumeTrace(t, instruments, self.topic, self.client.address)

    async def _reconnect(self, generation: int, lost: DejaqError) -> None:
        """Reconnect under the same consumer id (to the next broker of the list,
        with a jittered back-off between tries); deliveries already buffered
        stay valid."""
        self._call = None
        self._settler.holding = True
        # One line an outage, as it begins: a consumer that waits says why.
        log.warning(
            "consumer %s lost its stream to %s (%s): reconnecting",
            self.consumer_id,
            self.client.address,
            lost,
        )
        backoff = Backoff(self.retry_timeout_s)
        while not self._closing:
            await self.client.failover(generation)
            generation = self.client.generation  # the next try's channel, if it fails
            try:
                await self._connect(self.window - len(self._buffer) - len(self._early))
                log.info("consumer %s reconnected to %s", self.consumer_id, self.client.address)
                return
            except (BrokerUnavailable, AlreadyExists) as exc:
                if backoff.expired():
                    self._error = BrokerUnavailable(f"consumer could not reconnect: {exc}")
                    break
            except DejaqError as exc:
                self._error = exc
                break
            await backoff.wait()
        self._settler.holding = False
        self._settler.abandon(self._error or BrokerUnavailable("the consumer is closed"))
        self._end()


def _built(taken: Taken) -> Sequence[Delivery]:
    """The delivery objects of what a task took (a batch's: those built so far)."""
    if isinstance(taken, Delivery):
        return (taken,)
    if isinstance(taken, DeliveryBatch):
        return taken.built()
    return taken


def _unsettled(taken: Taken) -> Sequence[Delivery]:
    if isinstance(taken, DeliveryBatch):
        return taken.unsettled()
    return [d for d in _built(taken) if not d._settled]
