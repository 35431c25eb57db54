"""Burst: a hot time frame. ``burst_messages`` messages due at one millisecond
(a campaign at 09:00:00), drained twice through the public driver by consumer
processes (the plain loop): once on a topic capped at ``burst_rate`` a second
(``max_rate``), once on one without a cap.

With the cap the figure is how close the drain time comes to messages / rate,
and how evenly the deliveries spread: the count in each 100 ms after the due
millisecond. Without it, the drain rate (msgs/s), as the broker can. Early and
lost messages fail the run as everywhere. Run on memory.
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

from dejaq.core.clock import now_ms
from dejaq.core.model import TopicSettings

POLL_S = 0.05
BIN_MS = 100


def bound_s(plan: Plan) -> float:
    return 120 + 2 * plan.burst_messages / min(plan.burst_rate, 5_000)


def lead_ms(plan: Plan) -> int:
    """How far ahead the burst is due: time to produce it all first (~50k/s at worst)."""
    return plan.burst_margin_ms + plan.burst_messages // 50


async def run(ctx: Ctx) -> dict[str, Any]:
    capped = await drain(ctx, float(ctx.plan.burst_rate))
    free = await drain(ctx, 0.0)
    return {"capped": capped, "uncapped": free}


async def drain(ctx: Ctx, max_rate: float) -> dict[str, Any]:
    plan = ctx.plan
    n = plan.burst_messages
    label = "capped" if max_rate else "uncapped"
    topic = await ctx.topic(f"burst-{label}", TopicSettings(max_rate=max_rate))
    seen: set[str] = set()
    received: list[int] = []
    due_ms = 0
    try:
        producer = await ctx.producer()
        fleet = await WorkerFleet(
            f"{ctx.backend}-burst", plan.consumers, consumer_main, ctx.broker.address, topic
        ).start()
        try:
            due_ms = now_ms() + lead_ms(plan)
            produced = await producer.ask(("burst", topic, n, due_ms, "h-"), bound_s(plan))
            expected_s = n / max_rate if max_rate else 0.0
            deadline = time.monotonic() + lead_ms(plan) / 1000 + 2 * expected_s + plan.drain_s
            while len(seen) < produced["accepted"] and time.monotonic() < deadline:
                await asyncio.sleep(POLL_S)
                for got, _, i in await fleet.take():
                    seen.add(i)
                    received.append(got)
        finally:
            for got, _, i in await fleet.stop():
                seen.add(i)
                received.append(got)
        left = await ctx.left_in(topic)
    finally:
        await ctx.drop(topic)
    late_ms = np.array(received, dtype=np.int64) / 1e6 - due_ms
    early = int(np.count_nonzero(late_ms < 0))
    drain_s = float(late_ms.max()) / 1000 if len(late_ms) else 0.0
    out: dict[str, Any] = {
        "messages": n,
        "max_rate": max_rate,
        "consumers": plan.consumers,
        "produced": produced["accepted"],
        "produced_before_due": produced["answered_ms"] < due_ms,
        "delivered": len(seen),
        "duplicates": len(received) - len(seen),
        "lost": produced["accepted"] - len(seen),
        "early": early,
        "left_in_topic": left,
        "drain_s": round(drain_s, 3),
        "lateness": lateness_summary(late_ms, early),
    }
    if max_rate:
        bins = np.bincount(np.maximum(late_ms, 0).astype(np.int64) // BIN_MS)
        ideal_s = n / max_rate
        out["ideal_s"] = round(ideal_s, 3)
        out["drain_error_pct"] = round(100 * (drain_s - ideal_s) / ideal_s, 1)
        out["per_100ms"] = bins.tolist()
        full = bins[:-1] if len(bins) > 1 else bins  # the last bin is a partial one
        out["per_100ms_spread_pct"] = round(100 * float(full.std() / full.mean()), 1)
        # the busiest 100 ms against what the cap gives in 100 ms (its 10 ms of
        # burst allow 110%)
        out["per_100ms_max_pct_of_cap"] = round(
            100 * float(full.max()) / (max_rate * BIN_MS / 1000), 1
        )
        ctx.log(
            f"  burst: {n:,} due at one ms, cap {max_rate:,.0f}/s: drained in {drain_s:.2f} s"
            f" (ideal {ideal_s:.2f} s, {out['drain_error_pct']:+.1f}%),"
            f" per 100 ms {int(full.min())}-{int(full.max())}"
        )
    else:
        out["msgs_per_s"] = rate(len(seen), drain_s)
        ctx.log(
            f"  burst: {n:,} due at one ms, no cap: drained in {drain_s:.2f} s"
            f" ({out['msgs_per_s']:,} msgs/s)"
        )
    return out
