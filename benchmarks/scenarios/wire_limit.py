"""WIRE LIMIT (private client): the old lean end-to-end, never a product figure.

A consumer of ``suite/wire.py`` (one Settle frame acks a whole delivery frame,
deliveries read column-wise) is connected first; then N messages due now are
produced in frames of 1,000 (``in_flight`` pipelined), and the clock stops at
the last ack confirmed. What the broker can do when the client costs nothing
per message; set beside ``bulk`` (the driver) it shows the driver's share.
Reported in its own table, labelled "wire limit (private client)".
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from suite import wire
from suite.harness import Ctx
from suite.plan import Plan
from suite.stats import rate

from dejaq.core.clock import now_ms

BATCH = 1000


def bound_s(plan: Plan) -> float:
    return 60 + plan.wire_messages / 5_000


async def run(ctx: Ctx) -> dict[str, Any]:
    n = ctx.plan.wire_messages
    topic = await ctx.topic("wire")
    tally = wire.Tally(n)
    try:
        async with wire.LeanConsumer(ctx.client, topic, ctx.plan.credits, tally):
            due = now_ms()
            frames = list(wire.frames(topic, lambda _s, k: [due] * k, n, BATCH))
            start_ns = time.time_ns()
            done = await wire.produce(ctx.client, frames, ctx.plan.in_flight, cap_s=120)
            timed_out = False
            try:
                await asyncio.wait_for(tally.done.wait(), ctx.plan.drain_s + n / 5_000)
            except TimeoutError:
                timed_out = True
    finally:
        await ctx.drop(topic)
    seconds = max(tally.last_ack_ns - start_ns, 1) / 1e9
    values = tally.values()
    out = {
        "label": "wire limit (private client)",
        "messages": n,
        "produced": done.accepted,
        "delivered": tally.delivered,
        "left_behind": done.accepted - tally.delivered,
        "failed_acks": tally.failed_acks,
        "timed_out": timed_out,
        "early": int((values < 0).sum()),
        "seconds": round(seconds, 3),
        "msgs_per_s": rate(tally.delivered, seconds),
    }
    ctx.log(f"  wire limit (private client): {out['msgs_per_s']:,} msgs/s")
    return out
