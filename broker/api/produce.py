"""The Produce stream: decode a batch, validate each message, insert, answer.

Frames of one stream are processed concurrently (up to ``PIPELINE`` in flight)
and answered in order, so a backend with group commit can merge them. A frame
over the broker's ``max_produce_bytes`` or ``max_produce_messages`` is refused
whole (INVALID_ARGUMENT, nothing stored): the driver splits what it sends.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

import grpc

from dejaq.broker.api.produce_rules import Extras, all_valid, extras, screen
from dejaq.broker.context import BrokerContext
from dejaq.broker.dispatch import ranks
from dejaq.broker.observability import tracing
from dejaq.broker.observability.metrics import Event
from dejaq.core.buckets import bucket_of, buckets_of
from dejaq.core.errors import InvalidArgument
from dejaq.core.expiry import topic_expiry
from dejaq.core.model import InsertStatus, NewMessage, OnDuplicate, Topic, TopicSettings
from dejaq.core.wire.batches import ProduceBatch, decode_messages, encode_results
from dejaq.proto import dejaq_pb2 as pb

PIPELINE = 16


async def produce(broker: BrokerContext, req: pb.ProduceRequest) -> pb.ProduceResponse:
    """One frame: checked as a whole, then stored."""
    return await _store(broker, *await _check(broker, req))


async def produce_decoded(
    broker: BrokerContext,
    topic: str,
    batch: ProduceBatch,
    on_duplicate: OnDuplicate = OnDuplicate.KEEP,
) -> pb.ProduceResponse:
    """A frame given decoded, known to be within the broker's frame caps (an
    HTTP batch read from JSON): stored as ``produce`` stores the frame it encodes."""
    return await _store(broker, await broker.topics.get(topic), batch, on_duplicate)


def on_duplicate(value: int) -> OnDuplicate:
    """A frame's ``on_duplicate`` (pb.OnDuplicate); InvalidArgument for a value it lacks."""
    try:
        return OnDuplicate(value)
    except ValueError:
        raise InvalidArgument(
            f"on_duplicate {value} is none of KEEP (0), REPLACE (1), EXTEND (2)"
        ) from None


async def _check(
    broker: BrokerContext, req: pb.ProduceRequest
) -> tuple[Topic, ProduceBatch, OnDuplicate]:
    """What refuses a whole frame (an unknown topic, a malformed batch, a frame
    over the broker's caps)."""
    topic = await broker.topics.get(req.topic)
    limit = broker.config.max_produce_bytes
    if len(req.batch) > limit:
        raise InvalidArgument(
            f"a produce frame carries at most {limit} bytes, this one {len(req.batch)}: split it"
        )
    mode = on_duplicate(req.on_duplicate)
    return topic, decode_messages(req.batch, broker.config.max_produce_messages), mode


async def _store(
    broker: BrokerContext,
    topic: Topic,
    batch: ProduceBatch,
    mode: OnDuplicate = OnDuplicate.KEEP,
) -> pb.ProduceResponse:
    span = broker.tracing.produce(topic.name, len(batch.ids), batch.headers)
    if span is None:
        return await _store_frame(broker, topic, batch, mode)
    try:
        return await _store_frame(broker, topic, batch, mode)
    except BaseException as exc:
        tracing.failed(span, exc)
        raise
    finally:
        span.end()


async def _store_frame(
    broker: BrokerContext, topic: Topic, batch: ProduceBatch, mode: OnDuplicate
) -> pb.ProduceResponse:
    # Frames that arrive together would otherwise run back to back without a
    # suspension (an in-process backend never waits): let a due dispatch pass
    # go first, so a burst of produce frames delays delivery by one frame at most.
    await asyncio.sleep(0)
    ids = batch.ids
    if not all(ids):
        fresh = iter(broker.new_id.many(ids.count("")))
        ids = [i or next(fresh) for i in ids]
    positions: Sequence[int]
    checked = extras(batch)
    if not checked.errors and all_valid(batch, ids, topic):
        positions = range(len(ids))
        rejections: list[pb.Rejection] = []
    else:
        positions, rejections = screen(batch, ids, topic, checked.errors)
    if ranks.is_priority(topic):
        new = _ranked_messages(batch, ids, positions, topic, broker.clock.now_ms(), checked)
    else:
        new = _messages(batch, ids, positions, topic.settings, checked)
    status = [int(InsertStatus.REJECTED)] * len(ids)
    if new:
        results = await _insert(broker, topic.name, new, mode)
        earliest = None
        for pos, msg, st in zip(positions, new, results, strict=True):
            status[pos] = int(st)
            if st in _STORED and (earliest is None or msg.timestamp < earliest):
                earliest = msg.timestamp
        if earliest is not None:
            broker.hint(topic.name, earliest)
            # Let the woken dispatcher lease and hand its delivery to the
            # consumer's stream before this answer is written: the delivery is
            # what is late, the producer's answer is not (measured one message
            # at a time: the delivery leaves ~70 us sooner).
            await asyncio.sleep(0)
    _count(broker, topic.name, status)
    return pb.ProduceResponse(results=encode_results(status, ids), rejections=rejections)


# What a produce put on the timeline, at its message's timestamp: the
# dispatcher may have to wake sooner.
_STORED = (InsertStatus.ACCEPTED, InsertStatus.REPLACED, InsertStatus.EXTENDED)


async def _insert(
    broker: BrokerContext, topic: str, new: list[NewMessage], mode: OnDuplicate
) -> list[InsertStatus]:
    """Insert a frame's messages, in chunks where storage asks for them
    (``Storage.insert_chunk``), letting dispatch run in between. Each chunk is
    atomic, the frame is not: a frame that fails part way may have stored its
    first chunks, and its resend finds them as duplicates (produce is idempotent
    by id, and a repeated id within the frame still resolves to the first; with
    REPLACE or EXTEND the resend applies again, and a later repeat wins). The
    broker's clock judges whether a waiting message is under a live lease."""
    storage = broker.storage
    now = broker.clock.now_ms() if mode is not OnDuplicate.KEEP else 0
    size = storage.insert_chunk
    if not size or len(new) <= size:
        return await storage.insert(topic, new, mode, now)
    results: list[InsertStatus] = []
    for start in range(0, len(new), size):
        if start:
            await asyncio.sleep(0)
        results += await storage.insert(topic, new[start : start + size], mode, now)
    return results


def _messages(
    batch: ProduceBatch,
    ids: list[str],
    positions: Sequence[int],
    s: TopicSettings,
    checked: Extras,
) -> list[NewMessage]:
    n = s.buckets
    md = batch.max_deliveries
    exp = batch.expires_at
    keys, heads = checked.keys, checked.headers
    if not md and not exp and not s.expiry_ms and len(positions) == len(ids):
        # The common frame: every message valid, no per-message options. Built a
        # column at a time (NewMessage's defaults fill the options).
        buckets = buckets_of(ids, n)
        if keys is None and heads is None:
            return list(map(NewMessage, ids, batch.timestamps, batch.payloads, buckets))
        zeros = [0] * len(ids)
        return list(
            map(
                NewMessage,
                ids,
                batch.timestamps,
                batch.payloads,
                buckets,
                zeros,
                zeros,
                zeros,
                keys or [""] * len(ids),
                heads or [b""] * len(ids),
            )
        )
    out = []
    for i in positions:
        mid = ids[i]
        ts = batch.timestamps[i]
        expires = exp[i] if exp else 0
        if not expires:
            expires = topic_expiry(s, ts)
        bucket = bucket_of(mid, n)
        out.append(
            NewMessage(
                mid,
                ts,
                batch.payloads[i],
                bucket,
                md[i] if md else 0,
                expires,
                0,
                keys[i] if keys else "",
                heads[i] if heads else b"",
            )
        )
    return out


def _ranked_messages(
    batch: ProduceBatch,
    ids: list[str],
    positions: Sequence[int],
    topic: Topic,
    now: int,
    checked: Extras,
) -> list[NewMessage]:
    """A priority topic's messages: at their rank when available now, else at
    their not-before time (``broker/dispatch/ranks.py``). An expiry counts from the time
    a message is available."""
    s = topic.settings
    md = batch.max_deliveries
    exp = batch.expires_at
    pri = batch.priorities
    keys, heads = checked.keys, checked.headers
    out = []
    for i in positions:
        mid = ids[i]
        not_before = batch.timestamps[i]
        p = pri[i] if pri else 0
        expires = exp[i] if exp else 0
        if not expires:
            expires = topic_expiry(s, max(not_before, now))
        out.append(
            NewMessage(
                mid,
                ranks.stored_at(topic, p, not_before, now),
                batch.payloads[i],
                bucket_of(mid, s.buckets),
                md[i] if md else 0,
                expires,
                p,
                keys[i] if keys else "",
                heads[i] if heads else b"",
            )
        )
    return out


def _count(broker: BrokerContext, topic: str, status: list[int]) -> None:
    accepted = status.count(InsertStatus.ACCEPTED)
    rejected = status.count(InsertStatus.REJECTED)
    broker.metrics.count(Event.PRODUCED, topic, accepted)
    # Replaced, extended, leased: the id was there, as for a duplicate.
    broker.metrics.count(Event.DUPLICATES, topic, len(status) - accepted - rejected)
    broker.metrics.count(Event.REJECTED, topic, rejected)


async def produce_stream(
    broker: BrokerContext, requests: AsyncIterator[pb.ProduceRequest]
) -> AsyncIterator[pb.ProduceResponse]:
    async with broker.streams.slot(requests):
        async for response in _produce_frames(broker, requests):
            yield response


async def _produce_frames(
    broker: BrokerContext, requests: AsyncIterator[pb.ProduceRequest]
) -> AsyncIterator[pb.ProduceResponse]:
    # In order: a frame being stored, the error that refused a frame (it ends
    # the stream after the answers before it), or None at the end.
    pending: asyncio.Queue[asyncio.Task[pb.ProduceResponse] | Exception | None] = asyncio.Queue(
        PIPELINE
    )

    frames_in = broker.metrics.frame_counter("produce", "in")
    frames_out = broker.metrics.frame_counter("produce", "out")

    async def read() -> None:
        try:
            async for req in requests:
                frames_in.inc()
                # Checked here, in order, so no frame after a refused one is
                # stored: the stream's error then covers every frame not answered.
                checked = await _check(broker, req)
                task = asyncio.create_task(_store(broker, *checked))
                task.add_done_callback(_seen)
                await pending.put(task)
        except (grpc.RpcError, ConnectionError):
            pass  # a broken request stream ends the response stream the same way (None)
        except Exception as exc:  # a refused frame: answered after the frames before it
            await pending.put(exc)
            return
        await pending.put(None)

    reader = asyncio.create_task(read())
    broker.metrics.producers.inc()
    try:
        while (task := await pending.get()) is not None:
            if isinstance(task, Exception):
                raise task
            response = await task
            frames_out.inc()
            yield response
    finally:
        broker.metrics.producers.dec()
        reader.cancel()
        while not pending.empty():
            t = pending.get_nowait()
            if isinstance(t, asyncio.Task):
                t.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader


def _seen(task: asyncio.Task[pb.ProduceResponse]) -> None:
    """A frame's store is done. Its error, if any, is the stream's (raised where
    its answer is awaited); after the stream ended on an earlier one it is
    nobody's, and would be logged as never retrieved: taken here."""
    if not task.cancelled():
        task.exception()
