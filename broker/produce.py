"""The Produce stream: decode a batch, validate each message, insert, answer.

Frames of one stream are processed concurrently (up to ``PIPELINE`` in flight)
and answered in order, so a backend with group commit can merge them.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import grpc

from dejaq.broker import validation
from dejaq.broker.context import Broker
from dejaq.broker.ids import bucket_of
from dejaq.core.batches import decode_messages, encode_results
from dejaq.core.model import InsertStatus, NewMessage
from dejaq.proto import dejaq_pb2 as pb

PIPELINE = 16
_INVALID = grpc.StatusCode.INVALID_ARGUMENT.value[0]


async def produce(broker: Broker, req: pb.ProduceRequest) -> pb.ProduceResponse:
    topic = await broker.topics.get(req.topic)
    batch = decode_messages(req.batch)
    s = topic.settings
    n = len(batch)
    ids = list(batch.ids)
    status = [int(InsertStatus.REJECTED)] * n
    rejections: list[pb.Rejection] = []
    new: list[NewMessage] = []
    positions: list[int] = []
    for i in range(n):
        mid = ids[i] or broker.new_id()
        ids[i] = mid
        ts = batch.timestamps[i]
        payload = batch.payloads[i]
        err = validation.message_id_error(mid) or validation.timestamp_error(ts)
        if err is None and len(payload) > s.max_payload_bytes:
            err = f"payload of {len(payload)} bytes is over the topic's {s.max_payload_bytes}"
        if err is not None:
            rejections.append(pb.Rejection(index=i, code=_INVALID, reason=err))
            continue
        md = batch.max_deliveries[i] if batch.max_deliveries else 0
        expires = batch.expires_at[i] if batch.expires_at else 0
        if expires:
            err = validation.timestamp_error(expires)
            if err is not None:
                rejections.append(pb.Rejection(index=i, code=_INVALID, reason=f"expiry: {err}"))
                continue
        elif s.expiry_ms:
            expires = min(ts + s.expiry_ms, validation.MAX_TIMESTAMP)
        new.append(NewMessage(mid, ts, payload, bucket_of(mid, s.buckets), md, expires))
        positions.append(i)
    if new:
        results = await broker.storage.insert(topic.name, new)
        earliest = None
        for pos, msg, st in zip(positions, new, results, strict=True):
            status[pos] = int(st)
            if st == InsertStatus.ACCEPTED and (earliest is None or msg.timestamp < earliest):
                earliest = msg.timestamp
        if earliest is not None:
            broker.hint(topic.name, earliest)
    _count(broker, topic.name, status)
    return pb.ProduceResponse(results=encode_results(status, ids), rejections=rejections)


def _count(broker: Broker, topic: str, status: list[int]) -> None:
    accepted = status.count(InsertStatus.ACCEPTED)
    duplicates = status.count(InsertStatus.DUPLICATE)
    broker.metrics.count("produced", topic, accepted)
    broker.metrics.count("duplicates", topic, duplicates)
    broker.metrics.count("rejected", topic, len(status) - accepted - duplicates)


async def produce_stream(
    broker: Broker, requests: AsyncIterator[pb.ProduceRequest]
) -> AsyncIterator[pb.ProduceResponse]:
    pending: asyncio.Queue[asyncio.Task[pb.ProduceResponse] | None] = asyncio.Queue(PIPELINE)

    async def read() -> None:
        # A broken request stream ends the response stream the same way (None).
        with contextlib.suppress(grpc.RpcError, ConnectionError):
            async for req in requests:
                await pending.put(asyncio.create_task(produce(broker, req)))
        await pending.put(None)

    reader = asyncio.create_task(read())
    broker.metrics.producers.inc()
    try:
        while (task := await pending.get()) is not None:
            yield await task
    finally:
        broker.metrics.producers.dec()
        reader.cancel()
        while not pending.empty():
            t = pending.get_nowait()
            if t is not None:
                t.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await reader
