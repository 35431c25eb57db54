"""End-to-end throughput: produce -> due -> deliver -> ack, for a large batch due now.

The consumer is connected first (window ``credits``); then N messages, all
due at the instant the frames are built, are produced in frames of 1,000 with
``in_flight`` frames pipelined, and the clock stops when the last ack is
confirmed by the broker. ``lean`` uses the wire-level client (``suite.wire``:
one Settle frame acks a delivery frame); ``driver`` the driver's ``Producer``
and ``Consumer`` (an ack future per message, acks of one loop turn merged
into one frame, as ``Consumer.run`` does), with fewer messages.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from suite import wire
from suite.harness import Ctx
from suite.stats import cpu, lateness_summary, rate, without_cdf

from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing, Producer

BATCH = 1000


async def _lean(ctx: Ctx, topic: str, tally: wire.Tally) -> dict[str, Any]:
    n = tally.expected
    async with wire.LeanConsumer(ctx.client, topic, ctx.plan.credits, tally):
        due = wire.now_ms()
        frames = list(wire.frames(topic, lambda _s, k: [due] * k, n, BATCH))
        start_ns = time.time_ns()
        done = await wire.produce(ctx.client, frames, ctx.plan.in_flight, cap_s=120)
        produced_s = (time.time_ns() - start_ns) / 1e9
        timed_out = False
        try:
            await asyncio.wait_for(tally.done.wait(), ctx.plan.drain_timeout_s)
        except TimeoutError:
            timed_out = True
    seconds = max(tally.last_ack_ns - start_ns, 1) / 1e9
    late = lateness_summary(tally.values())
    return {
        "messages": n,
        "accepted": done.accepted,
        "delivered": tally.delivered,
        "duplicates": tally.duplicates,
        "failed_acks": tally.failed_acks,
        "timed_out": timed_out,
        "produce_s": round(produced_s, 3),
        "seconds": round(seconds, 3),
        "msgs_per_s": rate(tally.delivered, seconds),
        "early": late.get("early", 0),
        "lateness": without_cdf(late),
    }


async def lean(ctx: Ctx) -> dict[str, Any]:
    topic = await ctx.topic("e2e-lean")
    try:
        with cpu(ctx.broker.pid) as used:
            out = await _lean(ctx, topic, wire.Tally(ctx.plan.e2e_messages))
    finally:
        await ctx.drop(topic)
    return {**out, **used.as_dict()}


async def _driver(ctx: Ctx, topic: str, n: int) -> dict[str, Any]:
    seen: set[str] = set()
    early = 0
    acks: list[asyncio.Future[None]] = []

    async def take(consumer: Consumer) -> None:
        nonlocal early
        async for d in consumer:
            early += d.received_at_ms < d.timestamp_ms
            seen.add(d.id)
            acks.append(asyncio.ensure_future(d.ack()))
            if len(seen) >= n:
                return

    async with Consumer(ctx.client, topic, credits=ctx.plan.credits) as consumer:
        due = wire.now_ms()
        messages = [Outgoing(wire.PAYLOAD, due, id=i) for i in wire.Ids().take(n)]
        chunks = [messages[i : i + BATCH] for i in range(0, n, BATCH)]
        taking = asyncio.create_task(take(consumer))
        producer = Producer(ctx.client, topic, max_batch=BATCH, max_in_flight=ctx.plan.in_flight)
        slots = asyncio.Semaphore(ctx.plan.in_flight)

        async def send(chunk: list[Outgoing]) -> None:
            async with slots:
                await producer.send_batch(chunk)

        start = time.perf_counter()
        try:
            await asyncio.gather(*(send(c) for c in chunks))
        finally:
            await producer.close()
        failed, timed_out = 0, False
        try:
            await asyncio.wait_for(taking, ctx.plan.drain_timeout_s)
            outcomes = await asyncio.gather(*acks, return_exceptions=True)
            failed = sum(isinstance(o, BaseException) for o in outcomes)
        except TimeoutError:
            timed_out = True
        seconds = time.perf_counter() - start
    return {
        "messages": n,
        "delivered": len(seen),
        "failed_acks": failed,
        "timed_out": timed_out,
        "seconds": round(seconds, 3),
        "msgs_per_s": rate(len(seen), seconds),
        "early": early,
    }


async def driver(ctx: Ctx) -> dict[str, Any]:
    topic = await ctx.topic("e2e-driver")
    try:
        with cpu(ctx.broker.pid) as used:
            out = await _driver(ctx, topic, ctx.plan.e2e_driver_messages)
    finally:
        await ctx.drop(topic)
    return {**out, **used.as_dict()}


async def run(ctx: Ctx) -> dict[str, Any]:
    out = {"lean": await lean(ctx), "driver": await driver(ctx)}
    ctx.log(
        f"  end-to-end: lean {out['lean']['msgs_per_s']:,} msgs/s,"
        f" driver {out['driver']['msgs_per_s']:,} msgs/s"
    )
    return out
