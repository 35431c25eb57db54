"""The producer: batches messages into Produce frames on one stream.

``send`` calls made in the same event-loop turn travel in one frame (up to
``max_batch``); ``send_batch`` sends a batch in as few frames as fit (at most
``max_batch`` messages and ``max_frame_bytes`` bytes each, a larger message
alone). Up to ``max_in_flight`` frames are pipelined. Ids missing from a
message are generated here, in the client, so a frame resent after a broker
failure is idempotent: the broker answers DUPLICATE for what it had already
stored — also when that message was acked, cancelled or delivered at most once
meanwhile, as long as the topic's dedup window (``TopicSettings.dedup_window_ms``,
24 h by default) has not passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Final

import grpc
import numpy as np

from dejaq.core import headers as header_codec
from dejaq.core.clock import now_ms
from dejaq.core.due_time import DUE_TIME, EARLIEST
from dejaq.core.errors import BrokerUnavailable, DejaqError, InvalidArgument
from dejaq.core.keys import all_ascii_keys, check_key
from dejaq.core.model import InsertStatus, OnDuplicate
from dejaq.core.wire.batches import I64, decode_results, encode_messages
from dejaq.core.wire.frames import (
    MAX_FRAME_BYTES,
    MAX_MESSAGE_PAYLOAD,
    PRODUCE_FRAME_BYTES,
    PRODUCE_FRAME_MESSAGES,
    cuts,
    frame_bytes,
)
from dejaq.core.wire.status import error_for, status_code
from dejaq.driver import tracing
from dejaq.driver.backoff import Backoff
from dejaq.driver.client import RETRYABLE, Client, channel_dropped, first_write, to_error
from dejaq.proto import dejaq_pb2 as pb

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message to produce. ``timestamp_ms`` is when it is due (epoch ms); on a
    priority topic, its not-before time (past: available now), and ``priority``
    its priority (0 is the most urgent; a timeline takes only 0). ``key`` is
    whose message it is ("" = none), ``headers`` its metadata (docs/keys.md).
    ``on_duplicate`` says what happens when its id is already waiting: "keep"
    it (DUPLICATE), "replace" it with this one (REPLACED: a trailing
    debounce) or "extend" it to this due time (EXTENDED); one being
    delivered is left alone (LEASED) (docs/produce.md)."""

    payload: bytes
    timestamp_ms: int
    id: str = ""
    max_deliveries: int = 0
    expires_at_ms: int = 0
    priority: int = 0
    key: str = ""
    headers: Mapping[str, str] | None = None
    on_duplicate: str = "keep"


_TIMESTAMP: Final = attrgetter("timestamp_ms")
_PAYLOAD: Final = attrgetter("payload")
_ID: Final = attrgetter("id")
_MODE: Final = attrgetter("on_duplicate")
# send_columns' optional columns, in its order
_OPTIONAL: Final = tuple(
    attrgetter(name) for name in ("max_deliveries", "expires_at_ms", "priority", "key", "headers")
)


@dataclass(frozen=True, slots=True)
class ProduceResult:
    id: str
    status: InsertStatus
    error: DejaqError | None = None  # why it was rejected

    @property
    def accepted(self) -> bool:
        return self.status == InsertStatus.ACCEPTED


class _Frame:
    __slots__ = ("future", "ids", "request")

    def __init__(self, request: pb.ProduceRequest, ids: list[str]) -> None:
        self.request = request
        self.ids = ids
        self.future: asyncio.Future[list[ProduceResult]] = (
            asyncio.get_running_loop().create_future()
        )


class Producer:
    """Puts messages on a topic's timeline through one Produce stream.

    ``send`` queues one message and returns its ``ProduceResult`` (ACCEPTED, or
    DUPLICATE when the id exists, or existed within the topic's dedup window:
    produce is idempotent by id, so resending is safe); messages sent in
    the same event-loop turn share a frame. ``send_batch`` sends many at once.

    Options:
        max_batch: messages per frame at most (default 1000).
        max_frame_bytes: bytes per frame at most (default 8 MiB); one larger
            message goes alone, one too large for any frame (``MAX_FRAME_BYTES``)
            is refused with ``InvalidArgument`` before anything is sent, as is
            a time that can only be epoch seconds (0 < t < 10^12 ms: before
            2001-09-09); 0 or a past time means now.
        max_in_flight: frames awaiting their answer at once (default 16).
        retry_timeout_s: how long to keep resending in-flight frames to the next
            broker of the client's list after a broker is lost.
    """

    def __init__(
        self,
        client: Client,
        topic: str,
        max_batch: int = PRODUCE_FRAME_MESSAGES,
        max_in_flight: int = 16,
        retry_timeout_s: float = 30.0,
        max_frame_bytes: int = PRODUCE_FRAME_BYTES,
    ) -> None:
        self.client = client
        self.topic = topic
        self.max_batch = max_batch
        self.max_frame_bytes = min(max_frame_bytes, MAX_FRAME_BYTES)
        self.retry_timeout_s = retry_timeout_s
        self._slots = asyncio.Semaphore(max_in_flight)
        self._inflight: deque[_Frame] = deque()
        self._call: grpc.aio.StreamStreamCall | None = None
        self._reader: asyncio.Task[None] | None = None
        self._pending: list[tuple[Outgoing, asyncio.Future[ProduceResult]]] = []
        self._flushes: set[asyncio.Task[None]] = set()
        self._sending: set[asyncio.Task[list[ProduceResult]]] = set()  # frames, until answered
        self._lock = asyncio.Lock()
        self._id_prefix = secrets.token_hex(6)
        self._id_counter = 0
        # Until a broker first answers, a stream that fails is a broker that
        # cannot be reached, not one lost: once every broker of the list has
        # failed so, the frames fail at once with the cause (as a consumer's
        # start or a unary call does), rather than after retry_timeout_s.
        self._answered = False
        self._unreached = 0

    # -- public ---------------------------------------------------------------

    async def send(
        self,
        payload: bytes,
        *,
        at_ms: int | None = None,
        delay_ms: int = 0,
        id: str = "",
        max_deliveries: int = 0,
        expires_at_ms: int = 0,
        priority: int = 0,
        key: str = "",
        headers: Mapping[str, str] | None = None,
        on_duplicate: str = "keep",
    ) -> ProduceResult:
        """Schedule one message at ``at_ms`` (or ``now + delay_ms``). On a priority
        topic that is its not-before time, and ``priority`` its priority (0 is the
        most urgent); a timeline refuses a priority other than 0 (the result's
        ``error`` says why). ``key`` and ``headers`` outside their bounds
        (core/keys.py, core/headers.py) raise ``InvalidArgument``, nothing sent,
        as does an ``on_duplicate`` other than "keep", "replace" or "extend"
        (what happens when the id is already waiting: see ``Outgoing``)."""
        ts = at_ms if at_ms is not None else now_ms() + delay_ms
        _refuse_seconds([ts], [id])
        check_key(key)
        OnDuplicate.named(on_duplicate)
        if headers:
            headers = header_codec.check_headers(headers)
        fut: asyncio.Future[ProduceResult] = asyncio.get_running_loop().create_future()
        out = Outgoing(
            payload, ts, id, max_deliveries, expires_at_ms, priority, key, headers, on_duplicate
        )
        pending = self._pending
        if not pending:
            # The first send of this turn starts the task that sends them all: its
            # first step runs on the loop's next turn, by when the sends of this
            # one have joined the list (and the frame leaves one hop sooner than
            # from a callback that would start the task then).
            task = asyncio.ensure_future(self._send_pending(pending))
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)
        pending.append((out, fut))
        if len(pending) >= self.max_batch:
            self._pending = []  # full: the next send starts a list of its own
        return await fut

    async def send_batch(self, messages: Sequence[Outgoing]) -> list[ProduceResult]:
        """Send ``messages`` (in frames that fit); results in the same order.
        A frame carries one ``on_duplicate``: messages that differ in it go in
        frames apart."""
        if not messages:
            return []
        modes = list(map(_MODE, messages))
        if len(set(modes)) > 1:
            return await self._send_by_mode(messages, modes)
        # A column a pass in C (map over attrgetter): the optional ones only
        # where some message has one.
        md, exp, pri, keys, headers = (
            column if any(column) else None
            for column in (list(map(get, messages)) for get in _OPTIONAL)
        )
        return await self.send_columns(
            list(map(_TIMESTAMP, messages)),
            list(map(_PAYLOAD, messages)),
            list(map(_ID, messages)),
            md,
            exp,
            pri,
            keys,
            headers,
            modes[0],
        )

    async def _send_by_mode(
        self, messages: Sequence[Outgoing], modes: list[str]
    ) -> list[ProduceResult]:
        """``send_batch`` of messages with several ``on_duplicate``: a batch each."""
        groups: dict[str, list[int]] = {}
        for i, mode in enumerate(modes):
            groups.setdefault(mode, []).append(i)
        parts = await asyncio.gather(
            *(self.send_batch([messages[i] for i in at]) for at in groups.values())
        )
        out: list[ProduceResult | None] = [None] * len(messages)
        for at, results in zip(groups.values(), parts, strict=True):
            for i, result in zip(at, results, strict=True):
                out[i] = result
        return [r for r in out if r is not None]

    async def send_columns(
        self,
        timestamps_ms: Sequence[int] | I64,
        payloads: Sequence[bytes],
        ids: Sequence[str],
        max_deliveries: Sequence[int] | None = None,
        expires_at_ms: Sequence[int] | None = None,
        priorities: Sequence[int] | None = None,
        keys: Sequence[str] | None = None,
        headers: Sequence[Mapping[str, str] | None] | None = None,
        on_duplicate: str = "keep",
    ) -> list[ProduceResult]:
        """``send_batch`` for messages already held a column at a time (bulk
        loaders): results in the same order; an empty id is generated. Sent in
        frames of at most ``max_batch`` messages and ``max_frame_bytes`` bytes.
        ``priorities`` (priority topics): one per message, None = all 0;
        ``keys`` and ``headers`` likewise (None = none). A key or headers out
        of bounds raise ``InvalidArgument`` before anything is sent, as does an
        ``on_duplicate`` other than "keep", "replace" or "extend" (for every
        message: see ``Outgoing``)."""
        if not ids:
            return []
        mode = OnDuplicate.named(on_duplicate)
        filled = list(ids) if all(ids) else [i or self._new_id() for i in ids]
        _refuse_seconds(timestamps_ms, filled)
        if keys is not None:
            _check_keys(keys, filled)
        encoded = _encode_headers(headers, filled) if headers is not None else None
        sizes = list(map(len, payloads))
        if encoded is not None:  # headers count as payload bytes (frames.py)
            sizes = [p + len(h) for p, h in zip(sizes, encoded, strict=True)]
        n = len(filled)
        if n <= self.max_batch and frame_bytes(n, sum(sizes)) <= self.max_frame_bytes:
            return await self._send_frame(
                timestamps_ms,
                payloads,
                filled,
                max_deliveries,
                expires_at_ms,
                priorities,
                keys,
                encoded,
                mode,
            )
        largest = max(range(n), key=sizes.__getitem__)
        if frame_bytes(1, sizes[largest]) > MAX_FRAME_BYTES:
            raise InvalidArgument(
                f"message {filled[largest]!r}: a payload of {sizes[largest]} bytes does not fit"
                f" any frame (at most {MAX_MESSAGE_PAYLOAD} bytes); nothing was sent"
            )
        frames = []
        start = 0
        for end in cuts(sizes, self.max_batch, self.max_frame_bytes):
            part = slice(start, end)
            frames.append(
                self._send_frame(
                    timestamps_ms[part],
                    payloads[part],
                    filled[part],
                    max_deliveries[part] if max_deliveries is not None else None,
                    expires_at_ms[part] if expires_at_ms is not None else None,
                    priorities[part] if priorities is not None else None,
                    keys[part] if keys is not None else None,
                    encoded[part] if encoded is not None else None,
                    mode,
                )
            )
            start = end
        return [r for results in await asyncio.gather(*frames) for r in results]

    async def _send_frame(
        self,
        timestamps_ms: Sequence[int] | I64,
        payloads: Sequence[bytes],
        ids: list[str],
        max_deliveries: Sequence[int] | None,
        expires_at_ms: Sequence[int] | None,
        priorities: Sequence[int] | None,
        keys: Sequence[str] | None,
        headers: Sequence[bytes] | None,
        mode: OnDuplicate = OnDuplicate.KEEP,
    ) -> list[ProduceResult]:
        await self._slots.acquire()  # encoded only when it may go: in flight is bounded
        traced = self._traced(ids, timestamps_ms, keys)
        try:
            if traced is not None:
                headers = traced.stamped(headers)
            batch = encode_messages(
                timestamps_ms,
                payloads,
                ids,
                max_deliveries,
                expires_at_ms,
                priorities,
                keys,
                headers,
            )
            request = pb.ProduceRequest(
                topic=self.topic, batch=batch, on_duplicate=pb.OnDuplicate.Name(mode)
            )
            frame = _Frame(request, ids)
        except BaseException as exc:
            self._slots.release()
            if traced is not None:
                traced.ended(exc)
            raise
        # From here the frame is the stream's: it is written whole and answered
        # whatever its caller does. A caller that is cancelled (its wait_for ran
        # out) only stops waiting: a write cut short would leave the frame in
        # flight unsent (close would wait for it for good, and the answers after
        # it would go to the wrong frames), and a cancelled answer would raise
        # in close.
        task = asyncio.ensure_future(self._send(frame))
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)
        task.add_done_callback(_sent)
        if traced is not None:
            task.add_done_callback(traced.done)
        return await asyncio.shield(task)

    def _traced(
        self, ids: Sequence[str], timestamps_ms: Sequence[int] | I64, keys: Sequence[str] | None
    ) -> tracing.SendTrace | None:
        """The frame's ``send`` span and metrics; None (no work a message) while off."""
        tracer, instruments = tracing.tracer(), tracing.meter()
        if tracer is None and instruments is None:
            return None
        return tracing.SendTrace(
            tracer, instruments, self.topic, self.client.address, ids, timestamps_ms, keys
        )

    async def _send(self, frame: _Frame) -> list[ProduceResult]:
        try:
            await self._submit(frame)
            return await frame.future
        finally:
            self._slots.release()

    async def close(self) -> None:
        """Wait for frames in flight, then end the stream."""
        if self._flushes:
            await asyncio.wait(list(self._flushes))
        if self._sending:
            await asyncio.wait(list(self._sending))
        if self._call is not None:
            with contextlib.suppress(grpc.RpcError):
                await self._call.done_writing()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        self._call = None

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- internals ------------------------------------------------------------

    def _new_id(self) -> str:
        self._id_counter += 1
        return f"{now_ms():011x}-{self._id_prefix}-{self._id_counter:x}"

    async def _send_pending(
        self, chunk: list[tuple[Outgoing, asyncio.Future[ProduceResult]]]
    ) -> None:
        """Send the messages ``send`` queued in ``chunk`` and settle each
        caller's future with its result (or the error that stopped them all)."""
        if self._pending is chunk:
            self._pending = []
        try:
            results = await self.send_batch([m for m, _ in chunk])
        except asyncio.CancelledError:
            for _, fut in chunk:
                fut.cancel()
            raise
        except Exception as exc:
            for _, fut in chunk:
                if not fut.done():
                    fut.set_exception(exc)
            return
        for (_, fut), result in zip(chunk, results, strict=True):
            if not fut.done():
                fut.set_result(result)

    async def _submit(self, frame: _Frame) -> None:
        async with self._lock:
            self._inflight.append(frame)
            await self._write(frame)

    async def _write(self, frame: _Frame) -> None:
        try:
            if self._call is None:
                await first_write(self._open(), frame.request)
            else:
                await self._call.write(frame.request)
        except (grpc.RpcError, asyncio.InvalidStateError, DejaqError):
            pass  # the reader sees the broken stream and resends what is in flight

    def _open(self) -> grpc.aio.StreamStreamCall:
        """A new stream, with its reader."""
        generation = self.client.generation
        call = self.client.stub().Produce()
        self._call = call
        self._reader = asyncio.create_task(self._read(call, generation))
        return call

    async def _read(self, call: grpc.aio.StreamStreamCall, generation: int) -> None:
        """The one reader of ``call``. Should reading its answers fail in a way
        none of the paths below expects, the frames in flight are failed rather
        than left waiting on a stream that nobody reads any more (the next send
        opens a new one)."""
        try:
            await self._read_answers(call, generation)
        except Exception as exc:
            log.exception("produce stream to %s: reading its answers failed", self.client.address)
            call.cancel()
            async with self._lock:
                if self._call is None or self._call is call:
                    self._fail_all(BrokerUnavailable(f"the produce stream broke: {exc!r}"))

    async def _read_answers(self, call: grpc.aio.StreamStreamCall, generation: int) -> None:
        deadline: float | None = None
        while True:
            try:
                response = await call.read()
            except (grpc.aio.AioRpcError, asyncio.CancelledError) as exc:
                if isinstance(exc, asyncio.CancelledError):
                    if not channel_dropped():
                        raise
                    error: DejaqError = BrokerUnavailable(
                        "the produce stream's channel was dropped"
                    )
                else:
                    error = to_error(exc)
                if isinstance(error, BrokerUnavailable):
                    if self._none_reached(error):
                        return
                    deadline = deadline or time.monotonic() + self.retry_timeout_s
                    if time.monotonic() > deadline:
                        self._fail_all(error)
                        return
                else:
                    self._answered = True
                    # The broker refused the oldest frame; later ones are resent.
                    if self._inflight:
                        self._inflight.popleft().future.set_exception(error)
                    deadline = None
                await self._reconnect(call, isinstance(error, BrokerUnavailable), generation)
                return
            if response is grpc.aio.EOF:
                self._fail_all(BrokerUnavailable("the broker closed the produce stream"))
                return
            deadline = None
            self._answered = True
            frame = self._inflight[0]
            results = _results(frame, response)  # read before the frame leaves the flight
            self._inflight.popleft()
            if not frame.future.done():
                frame.future.set_result(results)

    async def _reconnect(
        self, broken: grpc.aio.StreamStreamCall, unavailable: bool, generation: int
    ) -> None:
        """Open a new stream (on the next broker if this one is gone); resend in-flight frames."""
        async with self._lock:
            if self._call is broken:
                self._call = None
            if unavailable:
                await self.client.failover(generation)
            backoff = Backoff(self.retry_timeout_s)
            while self._inflight:
                try:
                    generation = self.client.generation
                    call = self.client.stub().Produce()
                    first, *rest = self._inflight
                    await first_write(call, first.request)
                    for frame in rest:
                        await call.write(frame.request)
                except (grpc.RpcError, asyncio.InvalidStateError):  # ended before we wrote
                    if not self._answered and self._none_reached(await _ended(call)):
                        return
                    if backoff.expired():
                        self._fail_all(BrokerUnavailable("no broker accepted the produce stream"))
                        return
                    await backoff.wait()
                    await self.client.failover(generation)
                    continue
                self._call = call
                self._reader = asyncio.create_task(self._read(call, generation))
                return

    def _none_reached(self, error: DejaqError) -> bool:
        """Count a stream that failed before any broker answered; when every
        broker of the list has, fail the frames in flight with ``error`` (True)."""
        if self._answered:
            return False
        self._unreached += 1
        if self._unreached < len(self.client.addresses):
            return False
        self._unreached = 0  # a later send tries the list once more
        self._fail_all(self.client.explain(error))
        return True

    def _fail_all(self, error: DejaqError) -> None:
        while self._inflight:
            frame = self._inflight.popleft()
            if not frame.future.done():
                frame.future.set_exception(error)
        self._call = None


async def _ended(call: grpc.aio.StreamStreamCall) -> DejaqError:
    """Why a stream that refused a write ended."""
    code = await call.code()
    detail = await call.details() or code.name
    if code in RETRYABLE:
        return BrokerUnavailable(f"broker unavailable: {detail}")
    return error_for(code, detail, "")


def _sent(task: asyncio.Task[list[ProduceResult]]) -> None:
    """Done with a frame: its error is its caller's, who may have stopped waiting."""
    if not task.cancelled():
        task.exception()


# InsertStatus by its value, looked up rather than made by the enum's call (~1 µs).
_STATUS: Final = {s.value: s for s in InsertStatus}


def _results(frame: _Frame, response: pb.ProduceResponse) -> list[ProduceResult]:
    status, ids = decode_results(response.results)
    if len(status) != len(ids):
        raise ValueError("a produce answer's status and ids differ in length")
    statuses = list(map(_STATUS.__getitem__, status))
    if not response.rejections:
        return list(map(ProduceResult, ids, statuses))
    errors = {
        r.index: error_for(status_code(r.code), r.reason, r.kind) for r in response.rejections
    }
    return [
        ProduceResult(i, s, errors.get(n))
        for n, (s, i) in enumerate(zip(statuses, ids, strict=True))
    ]


def _check_keys(keys: Sequence[str], ids: Sequence[str]) -> None:
    """Every key within its bounds, or ``InvalidArgument`` naming the message."""
    if len(keys) != len(ids):
        raise InvalidArgument("one key per message")
    if all_ascii_keys(keys):
        return
    for key, mid in zip(keys, ids, strict=True):
        if key:
            try:
                check_key(key)
            except InvalidArgument as exc:
                raise InvalidArgument(f"message {mid!r}: {exc}; nothing was sent") from exc


def _encode_headers(headers: Sequence[Mapping[str, str] | None], ids: Sequence[str]) -> list[bytes]:
    """Each message's headers checked and encoded (b"" for none), or
    ``InvalidArgument`` naming the message."""
    if len(headers) != len(ids):
        raise InvalidArgument("one set of headers per message")
    out = []
    for h, mid in zip(headers, ids, strict=True):
        try:
            out.append(header_codec.encode(header_codec.check_headers(h)) if h else b"")
        except InvalidArgument as exc:
            raise InvalidArgument(f"message {mid!r}: {exc}; nothing was sent") from exc
    return out


def _refuse_seconds(timestamps_ms: Sequence[int] | I64, ids: Sequence[str]) -> None:
    """Refuse, before anything is sent, a time too early to be epoch ms: seconds
    would be stored as January 1970 and delivered at once (the broker refuses
    it too; here the caller learns it by an exception, not a result)."""
    low = timestamps_ms.min() if isinstance(timestamps_ms, np.ndarray) else min(timestamps_ms)
    if low >= EARLIEST:
        return
    i = next((k for k, ts in enumerate(timestamps_ms) if 0 < ts < EARLIEST), None)
    if i is None:  # 0 (now) and negatives: the broker answers those
        return
    named = f"message {ids[i]!r}: " if ids[i] else ""
    raise InvalidArgument(f"{named}{DUE_TIME.error(int(timestamps_ms[i]))}; nothing was sent")
