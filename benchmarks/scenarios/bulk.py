"""Bulk: produce -> deliver -> ack end to end through the public driver.

Consumer processes (the plain loop) are connected first; the producer process
then sends ``bulk_messages`` messages, each due the moment its frame is built,
in frames of 1,000 (``in_flight`` at once). msgs/s = messages / (first frame
sent -> every ack confirmed by the broker). The harness looks every 20 ms
whether all arrived, then asks the consumers to ``flush`` (wait for the
broker's confirmation of their acks): the end is when the last flush
returned, so the figure errs low by up to that 20 ms. Run on memory.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
from suite.fleets import WorkerFleet
from suite.harness import Ctx
from suite.plan import Plan
from suite.stats import lateness_summary, rate
from suite.workers import consumer_main

POLL_S = 0.02


def bound_s(plan: Plan) -> float:
    return 60 + plan.bulk_messages / 2_000  # even at 2k msgs/s it ends


async def run(ctx: Ctx) -> dict[str, Any]:
    plan = ctx.plan
    n = plan.bulk_messages
    topic = await ctx.topic("bulk")
    seen: set[str] = set()
    received: list[int] = []
    due: list[int] = []
    try:
        producer = await ctx.producer()
        fleet = await WorkerFleet(
            f"{ctx.backend}-bulk", plan.bulk_consumers, consumer_main, ctx.broker.address, topic
        ).start()
        try:
            produced = await producer.ask(("bulk", topic, n, "b-"), bound_s(plan))
            deadline = time.monotonic() + plan.drain_s + n / 2_000
            while len(seen) < produced["accepted"] and time.monotonic() < deadline:
                await asyncio.sleep(POLL_S)
                for got, d, i in await fleet.take():
                    seen.add(i)
                    received.append(got)
                    due.append(d)
            acked_ns = await fleet.flush()
        finally:
            for got, d, i in await fleet.stop():
                seen.add(i)
                received.append(got)
                due.append(d)
        left = await ctx.left_in(topic)
    finally:
        await ctx.drop(topic)
    got_ns = np.array(received, dtype=np.int64)
    due_ms = np.array(due, dtype=np.int64)
    early = int(np.count_nonzero(got_ns // 1_000_000 < due_ms))
    seconds = max(acked_ns - produced["start_ns"], 1) / 1e9
    out = {
        "messages": n,
        "consumers": plan.bulk_consumers,
        "produced": produced["accepted"],
        "produce_s": round((produced["end_ns"] - produced["start_ns"]) / 1e9, 3),
        "delivered": len(seen),
        "duplicates": len(received) - len(seen),
        "left_behind": produced["accepted"] - len(seen),
        "early": early,
        "left_in_topic": left,
        "seconds": round(seconds, 3),
        "msgs_per_s": rate(len(seen), seconds),
        "lateness": lateness_summary(got_ns / 1e6 - due_ms, early),
    }
    ctx.log(f"  bulk: {out['msgs_per_s']:,} msgs/s end to end ({len(seen):,} of {n:,})")
    return out
