"""Produce throughput by batch size (1, 10, 100, 1000 messages a frame).

100-byte payloads, 26-character ids, due a day ahead (nothing is delivered),
``in_flight`` frames pipelined on one Produce stream. Two clients:

- ``lean``: frames encoded before the clock starts, written straight to the
  stream (``suite.wire``): what the broker can take.
- ``driver``: ``Producer.send_batch`` from the driver, ``in_flight`` calls at
  once: what an application gets (the client's own encoding included).

Each point sends its count or stops at the time cap; msgs/s counts accepted
messages from the first frame to the last answer (a warm-up frame opens the
stream first).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from suite import wire
from suite.harness import Ctx
from suite.stats import cpu, rate

from dejaq.driver.producer import Outgoing, Producer

DAY_MS = 24 * 3600 * 1000


def _future(base: int) -> Any:
    return lambda start, n: [base + (start + i) % 60_000 for i in range(n)]


async def lean_point(ctx: Ctx, batch: int) -> dict[str, Any]:
    topic = await ctx.topic(f"produce-lean-{batch}")
    count = ctx.plan.produce_counts[batch]
    frames = list(wire.frames(topic, _future(wire.now_ms() + DAY_MS), count, batch))
    warm = wire.frame(topic, [f"warm-up-{batch}"], [wire.now_ms() + DAY_MS])
    try:
        with cpu(ctx.broker.pid) as used:
            done = await wire.produce(
                ctx.client, frames, ctx.plan.in_flight, ctx.plan.produce_cap_s, first=warm
            )
    finally:
        await ctx.drop(topic)
    return {
        "messages": done.sent,
        "accepted": done.accepted,
        "capped": done.capped,
        "seconds": round(done.seconds, 3),
        "msgs_per_s": rate(done.accepted, done.seconds),
        "frames_per_s": rate(done.frames, done.seconds),
        **used.as_dict(),
    }


async def driver_point(ctx: Ctx, batch: int) -> dict[str, Any]:
    topic = await ctx.topic(f"produce-driver-{batch}")
    count = ctx.plan.produce_counts[batch]
    far = wire.now_ms() + DAY_MS
    ids = wire.Ids().take(count)
    messages = [Outgoing(wire.PAYLOAD, far + i % 60_000, id=m) for i, m in enumerate(ids)]
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
        await producer.send_batch([Outgoing(wire.PAYLOAD, far, id=f"warm-up-{batch}")])
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
    out: dict[str, Any] = {"lean": {}, "driver": {}}
    for batch in ctx.plan.batch_sizes:
        out["lean"][str(batch)] = lean = await lean_point(ctx, batch)
        out["driver"][str(batch)] = drv = await driver_point(ctx, batch)
        ctx.log(
            f"  produce batch {batch:>4}: lean {lean['msgs_per_s']:>9,} msgs/s,"
            f" driver {drv['msgs_per_s']:>9,} msgs/s"
        )
    best = out["lean"].get("1000") or {}
    if best.get("msgs_per_s"):
        ctx.produce_rate = float(best["msgs_per_s"])
    return out
