"""Memory backend at scale: broker memory per waiting message, produce rate, idle CPU.

A fresh ``memory://`` broker, one topic (default buckets) with a consumer
connected through the driver (its dispatcher runs, as in production).
Messages due uniformly at random between one hour and 90 days ahead (the
reminders workload) are produced with ``Producer.send_batch`` (frames of
1,000, ``in_flight`` at once, built on the fly) in stages up to each count of
``scale_counts``. Per stage:

- produce msgs/s;
- broker RSS growth / messages stored = bytes per waiting message;
- idle CPU: the broker's user + system CPU over ``idle_s`` while nothing is
  due, as % of one core;
- a steady 1k due/s on another topic meanwhile (one step, consumer
  processes): lateness while millions wait.

A stage that would take over ``SCALE_CAP_S`` or need more memory than is
available (estimated from the previous one) is skipped with the reason.
"""

from __future__ import annotations

import asyncio
import gc
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from suite.broker import broker
from suite.fleets import WorkerFleet
from suite.harness import Ctx
from suite.messages import PAYLOAD, Ids
from suite.plan import Plan
from suite.procstat import available_bytes, cpu_s, rss_bytes
from suite.ramp import Rig, step
from suite.stats import rate
from suite.workers import consumer_main

from dejaq.core.clock import now_ms
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing, Producer

BATCH = 1000
HOUR_MS = 3600 * 1000
SPREAD_MS = 90 * 24 * HOUR_MS
SETTLE_S = 1.0
GIB = 1 << 30
SCALE_CAP_S = 240.0  # a stage estimated to take longer is skipped
SCALE_CAP_BYTES = 12 << 30
WHILE_WAITING_RATE = 1_000


def bound_s(plan: Plan) -> float:
    return 120 + len(plan.scale_counts) * (SCALE_CAP_S * 1.25 + plan.idle_s + 30)


async def fill(ctx: Ctx, topic: str, count: int, seed: int, cap_s: float) -> tuple[int, float]:
    """Produce ``count`` waiting messages (stops at ``cap_s``); (accepted, seconds)."""
    rng = random.Random(seed)
    ids = Ids()
    base = now_ms() + HOUR_MS
    producer = Producer(ctx.client, topic, max_batch=BATCH, max_in_flight=ctx.plan.in_flight)
    slots = asyncio.Semaphore(ctx.plan.in_flight)
    accepted = 0
    start = time.perf_counter()
    deadline = start + cap_s

    async def send(n: int) -> None:
        nonlocal accepted
        async with slots:
            if time.perf_counter() > deadline:
                return
            batch = [Outgoing(PAYLOAD, base + rng.randrange(SPREAD_MS), id=i) for i in ids.take(n)]
            results = await producer.send_batch(batch)
            accepted += sum(r.accepted for r in results)

    pending: set[asyncio.Task[None]] = set()
    try:
        for offset in range(0, count, BATCH):
            while len(pending) >= 2 * ctx.plan.in_flight:  # keep the client's memory flat
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            pending.add(asyncio.create_task(send(min(BATCH, count - offset))))
        await asyncio.gather(*pending)
    finally:
        await producer.close()
    return accepted, time.perf_counter() - start


async def idle_cpu(pid: int, seconds: float) -> dict[str, Any]:
    await asyncio.sleep(SETTLE_S)  # let the last frames and the dispatcher settle
    before = cpu_s(pid)
    await asyncio.sleep(seconds)  # waiting is the measurement: nothing is due for an hour
    used = cpu_s(pid) - before
    return {
        "seconds": seconds,
        "cpu_s": round(used, 3),
        "cpu_percent": round(100 * used / seconds, 3),
    }


async def while_waiting(ctx: Ctx) -> dict[str, Any]:
    """One steady step at 1k due/s on another topic, consumer processes as in ``steady``."""
    plan = ctx.plan
    topic = await ctx.topic("scale-trickle")
    try:
        fleet = await WorkerFleet(
            "scale-consumer", plan.consumers, consumer_main, ctx.broker.address, topic
        ).start()
        try:
            rig = Rig("memory scale", await ctx.producer(), fleet, ctx.probe(), topic)
            seconds = min(plan.step_s, 10.0)
            s, _ = await step(rig, WHILE_WAITING_RATE, seconds, plan.lead_ms, plan.drain_s, 0)
        finally:
            await fleet.stop()
    finally:
        await ctx.drop(topic)
    keep = ("rate", "produced", "delivered", "left_behind", "early", "delivered_per_s", "lateness")
    return {k: s[k] for k in keep}


def _skip_reason(stored: int, target: int, seconds: float, rss: int, base: int) -> str | None:
    more = target - stored
    est_s = seconds / stored * more
    est_bytes = rss + (rss - base) / stored * more
    if est_s > SCALE_CAP_S:
        return f"{target:,} would take ~{est_s:.0f} s (over the {SCALE_CAP_S:.0f} s cap)"
    if est_bytes > SCALE_CAP_BYTES:
        return f"{target:,} would need ~{est_bytes / GIB:.1f} GiB of broker memory (cap 12 GiB)"
    if est_bytes - rss > 0.8 * available_bytes():
        return f"{target:,} would need ~{(est_bytes - rss) / GIB:.1f} GiB more than is free"
    return None


async def run(plan: Plan, profile_dir: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {"stages": {}}
    with tempfile.TemporaryDirectory(prefix="dejaq-bench-scale-") as workdir:
        async with (
            broker("memory://", env=plan.broker_env) as proc,
            Client(proc.address) as client,
        ):
            ctx = Ctx("memory-scale", client, proc, plan, Path(workdir), profile_dir)
            try:
                topic = await ctx.topic("scale")
                async with Consumer(client, topic):
                    await asyncio.sleep(SETTLE_S)
                    gc.collect()
                    base = out["rss_before_bytes"] = rss_bytes(proc.pid)
                    stored, produce_s = 0, 0.0
                    for seed, target in enumerate(plan.scale_counts):
                        if stored:
                            rss = rss_bytes(proc.pid)
                            reason = _skip_reason(stored, target, produce_s, rss, base)
                            if reason:
                                ctx.log(f"scale {target:,}: skipped: {reason}")
                                out["stages"][str(target)] = {"skipped": reason}
                                continue
                        ctx.log(f"scale: producing up to {target:,} waiting messages ...")
                        added, seconds = await fill(
                            ctx, topic, target - stored, seed, SCALE_CAP_S * 1.25
                        )
                        stored, produce_s = stored + added, produce_s + seconds
                        rss = rss_bytes(proc.pid)
                        stage: dict[str, Any] = {
                            "stored": stored,
                            "produce_msgs_per_s": rate(added, seconds),
                            "rss_bytes": rss,
                            "bytes_per_message": round((rss - base) / max(stored, 1), 1),
                            "idle": await idle_cpu(proc.pid, plan.idle_s),
                            "while_waiting_1k_per_s": await while_waiting(ctx),
                        }
                        out["stages"][str(target)] = stage
                        late = stage["while_waiting_1k_per_s"]["lateness"]
                        ctx.log(
                            f"scale {stored:,}: {stage['produce_msgs_per_s']:,} msgs/s,"
                            f" {stage['bytes_per_message']} B/msg, idle CPU"
                            f" {stage['idle']['cpu_percent']}%, 1k due/s meanwhile:"
                            f" p99 {late.get('p99_ms')} ms"
                        )
            finally:
                await ctx.close()
    return out
