"""Scan: a whole topic read back a bucket at a time through ``Admin.scan_bucket``.

For each size in ``scan_counts``: a topic of 64 buckets is filled with that
many messages (100-byte payloads, 26-character ids, due a day ahead: nothing
is delivered), then this process pages through every bucket in turn, pages
of ``scan_page`` by id, as the Spark data source reads a topic. The figure is
the scan's msgs/s and µs a message: a scan linear in what it reads keeps the
µs a message flat as the topic grows.

The fill is not what is measured. On served backends and SQLite it goes
straight into storage, through the storage plugin from this process, in
batches of 10,000 (the broker's topic, its bucket hash); on memory, whose
storage lives in the broker, through ``Producer.send_batch``.

While the scan runs, a probe asks the broker's gRPC health service and
produces one message (to a topic of its own) every ``PROBE_EVERY_S``: the
health answers that were not SERVING, and the slowest produce, show whether
the read starved the writer or the broker's storage check.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from suite.harness import Ctx
from suite.messages import PAYLOAD, Ids
from suite.plan import Plan
from suite.stats import cpu, rate

from dejaq.core.buckets import buckets_of
from dejaq.core.clock import now_ms
from dejaq.core.model import NewMessage, TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.producer import Outgoing, Producer
from dejaq.storage_plugins import storage_from_url

BUCKETS = 64
FILL_BATCH = 10_000
PRODUCE_FRAME = 1_000
DAY_MS = 24 * 3600 * 1000
PROBE_EVERY_S = 0.2
SETTLE_S = 600.0  # a dropped topic's storage work may outlast the drop call


def bound_s(plan: Plan) -> float:
    # Fill and scan at 2k msgs/s at least, each.
    return 120 + sum(plan.scan_counts) / 1_000


async def fill_storage(url: str, topic: str, count: int) -> None:
    storage = storage_from_url(url)
    await storage.open()
    try:
        ids, far = Ids(), now_ms() + DAY_MS
        for start in range(0, count, FILL_BATCH):
            batch = ids.take(min(FILL_BATCH, count - start))
            buckets = buckets_of(batch, BUCKETS)
            await storage.insert(
                topic,
                [
                    NewMessage(id, far + (start + n) % 60_000, PAYLOAD, bucket)
                    for n, (id, bucket) in enumerate(zip(batch, buckets, strict=True))
                ],
            )
    finally:
        await storage.close()


async def fill_by_produce(ctx: Ctx, topic: str, count: int) -> None:
    producer = Producer(ctx.client, topic, max_batch=PRODUCE_FRAME)
    ids, far = Ids(), now_ms() + DAY_MS
    try:
        for start in range(0, count, PRODUCE_FRAME * ctx.plan.in_flight):
            end = min(count, start + PRODUCE_FRAME * ctx.plan.in_flight)
            chunks = [
                [Outgoing(PAYLOAD, far + (first + k) % 60_000, id=m) for k, m in enumerate(frame)]
                for first in range(start, end, PRODUCE_FRAME)
                for frame in [ids.take(min(PRODUCE_FRAME, end - first))]
            ]
            for results in await asyncio.gather(*(producer.send_batch(c) for c in chunks)):
                refused = [r for r in results if not r.accepted]
                if refused:
                    raise RuntimeError(f"fill: {len(refused)} messages refused")
    finally:
        await producer.close()


class Probe:
    """Health checks and one-message produces at a steady pace, until stopped."""

    def __init__(self, ctx: Ctx, topic: str) -> None:
        self.ctx = ctx
        self.topic = topic
        self.checks = 0
        self.not_serving = 0
        self.check_max_ms = 0.0
        self.produces = 0
        self.produce_max_ms = 0.0
        self._stop = asyncio.Event()

    async def run(self) -> None:
        ids = Ids()
        producer = Producer(self.ctx.client, self.topic)
        try:
            async with grpc.aio.insecure_channel(self.ctx.broker.address) as channel:
                health = health_pb2_grpc.HealthStub(channel)
                while not self._stop.is_set():
                    start = time.perf_counter()
                    try:
                        answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
                        serving = answer.status == health_pb2.HealthCheckResponse.SERVING
                    except grpc.aio.AioRpcError:
                        serving = False
                    self.checks += 1
                    self.not_serving += not serving
                    self.check_max_ms = max(self.check_max_ms, _ms_since(start))
                    start = time.perf_counter()
                    [id] = ids.take(1)
                    await producer.send(PAYLOAD, at_ms=now_ms() + DAY_MS, id=id)
                    self.produces += 1
                    self.produce_max_ms = max(self.produce_max_ms, _ms_since(start))
                    try:
                        await asyncio.wait_for(self._stop.wait(), PROBE_EVERY_S)
                    except TimeoutError:
                        pass
        finally:
            await producer.close()

    def stop(self) -> None:
        self._stop.set()

    def as_dict(self) -> dict[str, Any]:
        return {
            "health_checks": self.checks,
            "health_not_serving": self.not_serving,
            "health_check_max_ms": round(self.check_max_ms, 1),
            "probe_produces": self.produces,
            "probe_produce_max_ms": round(self.produce_max_ms, 1),
        }


def _ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


async def serving(ctx: Ctx) -> None:
    """Wait until the broker's health service says SERVING (bounded): deleting
    a large topic may keep storage busy after the delete call gave up."""
    deadline = time.monotonic() + SETTLE_S
    async with grpc.aio.insecure_channel(ctx.broker.address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            try:
                answer = await health.Check(health_pb2.HealthCheckRequest(), timeout=10)
                if answer.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(PROBE_EVERY_S)  # polling the broker's state, with a deadline
    raise RuntimeError(f"the broker did not serve again within {SETTLE_S:.0f} s")


async def scan_all(admin: Admin, topic: str, page: int) -> tuple[int, int]:
    """Every message of ``topic``, bucket by bucket; (messages, pages)."""
    messages = pages = 0
    for bucket in range(BUCKETS):
        after: str | None = ""
        while after is not None:
            found = await admin.scan_bucket(topic, bucket, after, page)
            messages += len(found.messages)
            pages += 1
            after = found.after_id
    return messages, pages


async def point(ctx: Ctx, count: int) -> dict[str, Any]:
    admin = Admin(ctx.client)
    topic = await ctx.topic(f"scan-{count}", TopicSettings(buckets=BUCKETS))
    probed = await ctx.topic(f"scan-probe-{count}")
    try:
        start = time.perf_counter()
        if ctx.store_url.startswith("memory:"):
            await fill_by_produce(ctx, topic, count)
        else:
            await fill_storage(ctx.store_url, topic, count)
        fill_s = time.perf_counter() - start
        probe = Probe(ctx, probed)
        probing = asyncio.create_task(probe.run())
        try:
            with cpu(ctx.broker.pid) as used:
                start = time.perf_counter()
                read, pages = await scan_all(admin, topic, ctx.plan.scan_page)
                seconds = time.perf_counter() - start
        finally:
            probe.stop()
            await probing
    finally:
        await ctx.drop(topic)
        await ctx.drop(probed)
        await serving(ctx)
    return {
        "messages": count,
        "read": read,
        "lost": count - read if read < count else 0,
        "pages": pages,
        "page": ctx.plan.scan_page,
        "fill_s": round(fill_s, 2),
        "fill": "produce" if ctx.store_url.startswith("memory:") else "storage plugin",
        "seconds": round(seconds, 3),
        "msgs_per_s": rate(read, seconds),
        "us_per_message": round(seconds / max(read, 1) * 1e6, 2),
        **probe.as_dict(),
        **used.as_dict(),
    }


async def run(ctx: Ctx) -> dict[str, Any]:
    points = []
    for count in ctx.plan.scan_counts:
        p = await point(ctx, count)
        points.append(p)
        ctx.log(
            f"  scan {count:>9,}: {p['seconds']:>8.2f} s, {p['msgs_per_s']:>9,} msgs/s,"
            f" {p['us_per_message']:>6.1f} µs/msg; health not serving {p['health_not_serving']},"
            f" probe produce max {p['probe_produce_max_ms']} ms (fill {p['fill_s']} s)"
        )
    return {"points": points}
