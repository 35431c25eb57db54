"""Fairness: a campaign beside reminders in one topic (docs/keys.md).

``fair_messages`` messages of key ``campaign`` due at one millisecond T0 (on a
served backend ``fair_messages_served``), and ``fair_keys`` other keys each
with ``fair_key_rate`` messages a second due across ``fair_s`` seconds from
T0 - 1 s: reminders, in the same topic. Everything is produced ahead by the
producer process through the public driver; ``consumers`` processes run the
plain loop. Run twice on fresh topics: with the keys, and the same load
without any key (every message in one time order, as before keys).

The figures: the reminders' lateness (p50 / p99 / max, and p99 of those due
while the campaign drained), the campaign's drain time and rate, and the
ratio of the keyed drain rate to the unkeyed one. Early and lost messages fail
the run as everywhere.
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

POLL_S = 0.05


def messages(plan: Plan, backend: str) -> int:
    return plan.fair_messages if backend == "memory" else plan.fair_messages_served


def reminders(plan: Plan) -> int:
    return plan.fair_keys * int(plan.fair_key_rate * plan.fair_s)


def lead_ms(plan: Plan, backend: str) -> int:
    """How far ahead T0 is: time to produce it all first (~20k/s at worst)."""
    return plan.fair_margin_ms + (messages(plan, backend) + reminders(plan)) // 20


def bound_s(plan: Plan) -> float:
    one = 60 + lead_ms(plan, "served") / 1000 + plan.fair_s + 2 * plan.fair_messages / 5_000
    return 2 * (one + plan.drain_s)


async def run(ctx: Ctx) -> dict[str, Any]:
    keyed = await once(ctx, True)
    plain = await once(ctx, False)
    out: dict[str, Any] = {"keyed": keyed, "unkeyed": plain}
    if keyed.get("campaign_msgs_per_s") and plain.get("campaign_msgs_per_s"):
        ratio = keyed["campaign_msgs_per_s"] / plain["campaign_msgs_per_s"]
        out["campaign_rate_ratio"] = round(ratio, 2)
        ctx.log(f"  fairness: the keyed campaign drains at {ratio:.2f}x the unkeyed one")
    return out


async def once(ctx: Ctx, keyed: bool) -> dict[str, Any]:
    plan = ctx.plan
    n = messages(plan, ctx.backend)
    label = "keyed" if keyed else "unkeyed"
    topic = await ctx.topic(f"fair-{label}")
    got: list[tuple[int, int, str]] = []
    seen: set[str] = set()
    due_ms = 0
    load = (n, plan.fair_keys, plan.fair_key_rate, plan.fair_s)
    try:
        producer = await ctx.producer()
        fleet = await WorkerFleet(
            f"{ctx.backend}-fair", plan.consumers, consumer_main, ctx.broker.address, topic
        ).start()
        try:
            due_ms = now_ms() + lead_ms(plan, ctx.backend)
            produced = await producer.ask(("campaign", topic, load, due_ms, keyed), bound_s(plan))
            total = produced["reminders"] + produced["campaign"]
            deadline = time.monotonic() + (due_ms - now_ms()) / 1000 + plan.fair_s
            deadline += 2 * n / 5_000 + plan.drain_s
            while len(seen) < total and time.monotonic() < deadline:
                await asyncio.sleep(POLL_S)
                for record in await fleet.take():
                    seen.add(record[2])
                    got.append(record)
        finally:
            for record in await fleet.stop():
                seen.add(record[2])
                got.append(record)
        left = await ctx.left_in(topic)
    finally:
        await ctx.drop(topic)
    return summary(ctx, label, n, due_ms, produced, got, len(seen), left)


def summary(
    ctx: Ctx,
    label: str,
    n: int,
    due_ms: int,
    produced: dict[str, Any],
    got: list[tuple[int, int, str]],
    distinct: int,
    left: int,
) -> dict[str, Any]:
    received = np.array([r[0] for r in got], dtype=np.int64)
    due = np.array([r[1] for r in got], dtype=np.int64)
    campaign = np.array([r[2].startswith("c-") for r in got], dtype=np.bool_)
    late_ms = received / 1e6 - due
    early = int(np.count_nonzero(received // 1_000_000 < due))
    c_late = late_ms[campaign]
    drain_s = float(c_late.max()) / 1000 if len(c_late) else 0.0
    r_late = late_ms[~campaign]
    r_due = due[~campaign]
    during = r_late[(r_due >= due_ms) & (r_due <= due_ms + drain_s * 1000)]
    accepted = produced["reminders"] + produced["campaign"]
    out: dict[str, Any] = {
        "campaign": n,
        "reminders": produced["reminders"],
        "keys": ctx.plan.fair_keys,
        "consumers": ctx.plan.consumers,
        "produced_before_due": produced["answered_ms"] < due_ms - 1000,
        "delivered": distinct,
        "duplicates": len(got) - distinct,
        "lost": accepted - distinct,
        "early": early,
        "left_in_topic": left,
        "campaign_drain_s": round(drain_s, 3),
        "campaign_msgs_per_s": rate(int(campaign.sum()), drain_s),
        "reminders_lateness": lateness_summary(r_late, 0),
        "reminders_during_drain": lateness_summary(during, 0),
    }
    rl = out["reminders_lateness"]
    ctx.log(
        f"  fairness {label}: {n:,} campaign drained in {drain_s:.2f} s"
        f" ({out['campaign_msgs_per_s']:,}/s); reminders p50 {rl.get('p50_ms')} ms,"
        f" p99 {rl.get('p99_ms')} ms, max {rl.get('max_ms')} ms; early {early},"
        f" lost {out['lost']}"
    )
    return out
