"""A task's partition, streamed through the driver's Producer.

Batches of rows become Produce frames of up to ``batchSize`` messages (and
8 MiB of payload), one Producer (one Produce stream) per topic on one Client
(the broker list, with failover: frames in flight are resent to the next
broker, where what was already stored answers DUPLICATE). At most
``maxInFlight`` frames await their answer; reading the next rows from Spark
waits for room, so memory stays bounded whatever the partition's size. Rows are
read in a worker thread while the frames before them travel.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa

from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import InsertStatus
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Producer
from dejaq.driver.spark.columns import Columns
from dejaq.driver.spark.options import WriteOptions
from dejaq.driver.spark.rejects import RejectsFile
from dejaq.driver.spark.rows import Messages, Refusal, prepare, topics_of
from dejaq.driver.spark.summary import TaskReport, TooManyRejects

FRAME_PAYLOAD_BYTES = 8 << 20


def chunks(m: Messages, size: int, budget: int = FRAME_PAYLOAD_BYTES) -> Iterator[Messages]:
    """``m`` cut into frames of at most ``size`` messages and about ``budget`` payload
    bytes (a single bigger payload travels alone)."""
    n = len(m.ids)
    ends = np.cumsum(np.fromiter(map(len, m.payloads), np.int64, n))
    start = 0
    while start < n:
        base = int(ends[start - 1]) if start else 0
        end = min(start + size, int(np.searchsorted(ends, base + budget, "right")))
        end = max(end, start + 1)
        yield Messages(
            m.topic,
            m.rows[start:end],
            m.ids[start:end],
            m.timestamps[start:end],
            m.payloads[start:end],
            m.max_deliveries[start:end] if m.max_deliveries is not None else None,
            m.expires_at[start:end] if m.expires_at is not None else None,
            m.keys[start:end] if m.keys is not None else None,
            m.headers[start:end] if m.headers is not None else None,
        )
        start = end


class Sender:
    """One task attempt's sending: counts into ``report``, refusals into ``rejects``."""

    def __init__(
        self, client: Client, o: WriteOptions, c: Columns, report: TaskReport, rejects: RejectsFile
    ) -> None:
        self.client = client
        self.options = o
        self.columns = c
        self.report = report
        self.rejects = rejects
        self._admin = Admin(client)
        self._topics: dict[str, bool] = {}  # name -> exists
        self._producers: dict[str, Producer] = {}
        self._inflight: deque[asyncio.Task[None]] = deque()

    async def run(self, batches: Iterable[pa.RecordBatch]) -> None:
        rows = iter(batches)
        try:
            # Spark computes the next rows in the calling thread's read: it runs in
            # a worker thread, so the frames in flight are sent and answered meanwhile.
            while (batch := await asyncio.to_thread(next, rows, None)) is not None:
                await self._batch(batch)
            while self._inflight:
                await self._inflight.popleft()
        finally:
            for task in self._inflight:
                task.cancel()
            await asyncio.gather(*self._inflight, return_exceptions=True)
            for producer in self._producers.values():
                await producer.close()

    async def _batch(self, batch: pa.RecordBatch) -> None:
        self.report.rows += batch.num_rows
        unknown = [t for t in topics_of(batch, self.columns) if not await self._exists(t)]
        prepared = prepare(batch, self.columns, self.options.topic, unknown)
        self._refused(batch, prepared.refused)
        for messages in prepared.messages:
            producer = self._producer(messages.topic)
            for frame in chunks(messages, self.options.batch_size):
                while len(self._inflight) >= self.options.max_in_flight:
                    await self._inflight.popleft()
                self._inflight.append(asyncio.create_task(self._send(producer, batch, frame)))

    async def _send(self, producer: Producer, batch: pa.RecordBatch, m: Messages) -> None:
        results = await producer.send_columns(
            m.timestamps,
            m.payloads,
            m.ids,
            m.max_deliveries,
            m.expires_at,
            keys=m.keys,
            headers=m.headers,
            on_duplicate=self.options.on_duplicate,
        )
        statuses = [r.status for r in results]
        self.report.accepted += statuses.count(InsertStatus.ACCEPTED)
        self.report.duplicate += statuses.count(InsertStatus.DUPLICATE)
        self.report.replaced += statuses.count(InsertStatus.REPLACED)
        self.report.extended += statuses.count(InsertStatus.EXTENDED)
        self.report.leased += statuses.count(InsertStatus.LEASED)
        if InsertStatus.REJECTED in statuses:
            refused = [
                Refusal(int(m.rows[k]), str(r.error or "refused by the broker"), r.id, m.topic)
                for k, r in enumerate(results)
                if r.status == InsertStatus.REJECTED
            ]
            self._refused(batch, refused)

    def _refused(self, batch: pa.RecordBatch, refused: list[Refusal]) -> None:
        if not refused:
            return
        self.report.rejected += len(refused)
        for r in refused:
            self.report.sample(r.reason)
        self.rejects.add(batch, refused)
        limit = self.options.max_rejects
        if limit is not None and self.report.rejected > limit:
            raise TooManyRejects(
                f"dejaq: {self.report.rejected} rows refused in partition"
                f" {self.report.partition} alone, over maxRejects={limit}:"
                f" {'; '.join(self.report.samples)}"
            )

    def _producer(self, topic: str) -> Producer:
        producer = self._producers.get(topic)
        if producer is None:
            o = self.options
            producer = Producer(
                self.client,
                topic,
                max_batch=o.batch_size,
                max_in_flight=o.max_in_flight,
                retry_timeout_s=o.retry_timeout_s,
            )
            self._producers[topic] = producer
        return producer

    async def _exists(self, topic: str) -> bool:
        known = self._topics.get(topic)
        if known is None:
            try:
                await self._admin.describe_topic(topic)
                known = True
            except (NotFound, InvalidArgument):
                known = False
            self._topics[topic] = known
        return known
