"""Memory backend at scale: broker memory per waiting message, produce rate, idle CPU.

A fresh ``memory://`` broker, one topic (64 buckets), one consumer connected
(the dispatcher is running, as in production). Messages are due uniformly at
random between one hour and 90 days ahead (the reminders workload), so none is
delivered. In stages up to each count of ``scale_counts`` (1M; 10M unless
``--quick``):

- produce rate of the stage (frames of 1,000, ``in_flight`` pipelined, built
  on the fly by the client so its memory stays flat);
- broker RSS (``psutil``: resident set) before the first message and after
  each stage; ``bytes_per_message`` = growth / messages stored;
- idle CPU: the broker's user + system CPU over ``idle_s`` while nothing is
  due, as a percent of one core;
- lateness of a steady 1k due/s on another topic of the same broker while
  the stage's messages wait (the reminders workload: a trickle due among
  millions waiting; garbage collection and O(n) scans show here).

Before a stage starts, its time and memory are estimated from the previous
one; a stage that would take over ``SCALE_CAP_S`` or need more than
``SCALE_CAP_BYTES`` (or more than 80% of the memory available) is skipped, with
the reason recorded. A stage that runs over its time bound anyway stops early
and reports what it stored.
"""

from __future__ import annotations

import asyncio
import gc
import random
from pathlib import Path
from typing import Any

from common import BrokerFailed, broker
from suite import profile, wire
from suite.harness import Ctx
from suite.plan import SCALE_CAP_BYTES, SCALE_CAP_S, Plan
from suite.stats import available_bytes, process_cpu_s, rate, rss_bytes, without_cdf

from dejaq.driver.client import Client

from . import lateness

BATCH = 1000
HOUR_MS = 3600 * 1000
SPREAD_MS = 90 * 24 * HOUR_MS
SETTLE_S = 1.0
GIB = 1 << 30
WHILE_WAITING_RATE = 1_000  # due/s on another topic while the stage's messages wait


def _due(seed: int) -> Any:
    rng = random.Random(seed)
    base = wire.now_ms() + HOUR_MS
    return lambda _start, n: [base + rng.randrange(SPREAD_MS) for _ in range(n)]


async def idle_cpu(pid: int, seconds: float) -> dict[str, Any]:
    await asyncio.sleep(SETTLE_S)  # let the last frames and the dispatcher settle
    before = process_cpu_s(pid)
    # Waiting is the measurement: nothing is due for an hour.
    await asyncio.sleep(seconds)
    used = process_cpu_s(pid) - before
    return {
        "seconds": seconds,
        "cpu_s": round(used, 3),
        "cpu_percent": round(100 * used / seconds, 3),
    }


def _skip_reason(stored: int, target: int, seconds: float, rss: int, base: int) -> str | None:
    more = target - stored
    per_msg = (rss - base) / stored
    est_s = seconds / stored * more
    est_bytes = rss + per_msg * more
    if est_s > SCALE_CAP_S:
        return (
            f"{target:,} would take ~{est_s:.0f} s at the {stored:,} stage's rate"
            f" (over the {SCALE_CAP_S:.0f} s cap)"
        )
    if est_bytes > SCALE_CAP_BYTES:
        return f"{target:,} would need ~{est_bytes / GIB:.1f} GiB of broker memory (cap 12 GiB)"
    if est_bytes - rss > 0.8 * available_bytes():
        return (
            f"{target:,} would need ~{(est_bytes - rss) / GIB:.1f} GiB more;"
            f" only {available_bytes() / GIB:.1f} GiB is available"
        )
    return None


async def _stage(
    ctx: Ctx, topic: str, target: int, stored: int, seed: int, base: int
) -> dict[str, Any]:
    """Produce up to ``target`` waiting messages, then read memory, idle CPU and lateness."""
    pid, plan = ctx.broker.pid, ctx.plan
    print(f"[memory] scale: producing up to {target:,} waiting messages ...", flush=True)
    source = wire.frames(topic, _due(seed), target - stored, BATCH)
    prof = _profile_path(ctx, f"scale-{target}")
    async with profile.record(pid, prof):
        done = await wire.produce(ctx.client, source, plan.in_flight, SCALE_CAP_S * 1.25)
    stored += done.accepted
    rss = rss_bytes(pid)
    stage: dict[str, Any] = {
        "stored": stored,
        "capped": done.capped,
        "produce_s": round(done.seconds, 2),
        "produce_msgs_per_s": rate(done.accepted, done.seconds),
        "rss_bytes": rss,
        "bytes_per_message": round((rss - base) / max(stored, 1), 1),
    }
    if prof is not None and prof.exists():
        stage["profile"] = profile.hot_spots(prof)
    prof = _profile_path(ctx, f"scale-{target}-idle")
    async with profile.record(pid, prof):
        stage["idle"] = await idle_cpu(pid, plan.idle_s)
    if prof is not None and prof.exists():
        stage["idle"]["profile"] = profile.hot_spots(prof)
    # The reminders workload: a trickle due while millions wait (another topic).
    steady = await lateness.steady(ctx, WHILE_WAITING_RATE)
    stage["lateness_1k_per_s_while_waiting"] = {
        k: steady[k] for k in ("messages", "delivered", "early", "kept_up", "achieved_per_s")
    } | {"lateness": without_cdf(steady["lateness"])}
    late = stage["lateness_1k_per_s_while_waiting"]["lateness"]
    print(
        f"[memory] scale {stored:,}: {stage['produce_msgs_per_s']:,} msgs/s,"
        f" {stage['bytes_per_message']} B/msg (RSS {rss / GIB:.2f} GiB),"
        f" idle CPU {stage['idle']['cpu_percent']}%, 1k due/s meanwhile:"
        f" p99 {late.get('p99_ms')} ms, max {late.get('max_ms')} ms",
        flush=True,
    )
    return stage


def _profile_path(ctx: Ctx, name: str) -> Path | None:
    return ctx.profile_dir / f"memory-{name}.txt" if ctx.profile_dir else None


async def run(plan: Plan, profile_dir: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {"stages": {}}
    try:
        async with (
            broker("memory://", env=plan.broker_env) as proc,
            Client(proc.address) as client,
        ):
            ctx = Ctx("memory-scale", client, proc, plan, profile_dir)
            topic = await ctx.topic("scale")
            tally = wire.Tally(1)
            async with wire.LeanConsumer(client, topic, plan.credits, tally):
                await asyncio.sleep(SETTLE_S)
                gc.collect()
                base = out["rss_before_bytes"] = rss_bytes(proc.pid)
                stored, produce_s = 0, 0.0
                for seed, target in enumerate(plan.scale_counts):
                    if stored:
                        reason = _skip_reason(stored, target, produce_s, rss_bytes(proc.pid), base)
                        if reason:
                            print(f"[memory] scale {target:,}: skipped: {reason}", flush=True)
                            out["stages"][str(target)] = {"skipped": reason}
                            continue
                    stage = await _stage(ctx, topic, target, stored, seed, base)
                    out["stages"][str(target)] = stage
                    stored, produce_s = stage["stored"], produce_s + stage["produce_s"]
                    ctx.produce_rate = float(stage["produce_msgs_per_s"])
                out["delivered_from_waiting"] = tally.delivered  # must be 0: none was due
    except BrokerFailed as exc:
        return {"skipped": str(exc)}
    return out
