"""Produce throughput by batch size (1, 10, 100, 1000 messages a frame), through the driver,
then batches of 1,000 over the HTTP API (``http_produce.py``) in the same run.

On memory, what an idle HTTP surface costs: the driver's batch-1000 point on
the run's broker (``--http`` on, no HTTP request meanwhile) and on a second
broker started without ``--http``, alternately, ``IDLE_ROUNDS`` times each;
the medians of the broker's CPU a message.

100-byte payloads, 26-character ids, due a day ahead (nothing is delivered):
``Producer.send_batch`` from this process (not the broker's), ``in_flight``
calls at once, as an application does. Each point sends its count or stops
at the time cap; msgs/s counts accepted messages from the first frame to the
last answer, after a warm-up frame has opened the stream.
"""

from __future__ import annotations

import asyncio
import dataclasses
import statistics
import time
from typing import Any

from suite.broker import broker
from suite.harness import Ctx
from suite.messages import PAYLOAD, Ids
from suite.plan import BATCH_SIZES, Plan
from suite.stats import cpu, rate

from dejaq.core.clock import now_ms
from dejaq.driver import Client
from dejaq.driver.producer import Outgoing, Producer

from . import http_produce

DAY_MS = 24 * 3600 * 1000
IDLE_ROUNDS = 3


def bound_s(plan: Plan) -> float:
    return 60 + len(BATCH_SIZES) * (plan.produce_cap_s + 15)


async def point(ctx: Ctx, batch: int) -> dict[str, Any]:
    topic = await ctx.topic(f"produce-{batch}")
    count = ctx.plan.produce_counts[batch]
    far = now_ms() + DAY_MS
    ids = Ids().take(count)
    messages = [Outgoing(PAYLOAD, far + i % 60_000, id=m) for i, m in enumerate(ids)]
    queue = [messages[i : i + batch] for i in range(0, count, batch)]
    queue.reverse()
    producer = Producer(ctx.client, topic, max_batch=batch, max_in_flight=ctx.plan.in_flight)
    accepted = sent = 0

    async def worker(deadline: float) -> None:
        nonlocal accepted, sent
        while queue and time.perf_counter() < deadline:
            chunk = queue.pop()
            sent += len(chunk)
            results = await producer.send_batch(chunk)
            accepted += sum(r.accepted for r in results)

    try:
        await producer.send_batch([Outgoing(PAYLOAD, far, id=f"warm-up-{batch}")])
        with cpu(ctx.broker.pid) as used:
            start = time.perf_counter()
            deadline = start + ctx.plan.produce_cap_s
            await asyncio.gather(*(worker(deadline) for _ in range(ctx.plan.in_flight)))
            seconds = time.perf_counter() - start
    finally:
        await producer.close()
        await ctx.drop(topic)
    return {
        "messages": sent,
        "accepted": accepted,
        "capped": sent < count,
        "seconds": round(seconds, 3),
        "msgs_per_s": rate(accepted, seconds),
        **used.as_dict(),
    }


async def run(ctx: Ctx) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for batch in BATCH_SIZES:
        p = out[str(batch)] = await point(ctx, batch)
        ctx.log(f"  produce batch {batch:>4}: {p['msgs_per_s']:>9,} msgs/s")
    h = out["http"] = await http_produce.point(ctx, out.get(str(http_produce.BATCH)))
    ctx.log(
        f"  produce batch 1000, HTTP: {h['msgs_per_s']:>9,} msgs/s, {h['ratio_to_grpc']} of gRPC;"
        f" broker {h['broker_us_per_msg']} µs/msg against gRPC's {h['grpc_broker_us_per_msg']}:"
        f" the HTTP surface's share {h['http_cpu_share']}"
    )
    if ctx.backend == "memory":
        i = out["idle_http"] = await idle_http(ctx)
        ctx.log(
            f"  produce batch 1000, gRPC: broker {i['http_on_us_per_msg']} µs/msg with --http on"
            f" and idle, {i['http_off_us_per_msg']} without: the idle surface's share"
            f" {i['idle_http_share']}"
        )
    return out


async def idle_http(ctx: Ctx) -> dict[str, Any]:
    """The broker's CPU µs a message of the driver's batch-1000 point, with
    ``--http`` on and idle, and off."""
    on: list[float] = []
    off: list[float] = []
    async with (
        broker(ctx.store_url, cwd=str(ctx.workdir), http_api=False) as plain,
        Client(plain.address) as client,
    ):
        bare = dataclasses.replace(ctx, client=client, broker=plain)
        for _ in range(IDLE_ROUNDS):
            for side, c in ((on, ctx), (off, bare)):
                us = http_produce.broker_us_per_msg(await point(c, http_produce.BATCH))
                if us is not None:
                    side.append(us)
    on_us = statistics.median(on) if on else None
    off_us = statistics.median(off) if off else None
    return {
        "rounds": IDLE_ROUNDS,
        "http_on_us_per_msg": on_us,
        "http_off_us_per_msg": off_us,
        "idle_http_share": round(1 - off_us / on_us, 3) if on_us and off_us else None,
    }
