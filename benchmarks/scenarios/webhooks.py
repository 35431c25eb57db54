"""Webhook delivery lateness: due time -> the request's first byte at a local sink process.

A sink process (``suite/webhook_sink.py``: HTTP/1.1 read by hand, answers 200 at once) and a
webhook topic on the backend's broker (its brokers allow 127.0.0.1 as a
webhook target), ``webhook_concurrency`` requests in flight. Per step, the
step's messages are produced ahead of time through the driver (the first due
``LEAD_MS`` after producing starts), spread evenly at the step's rate; then
the sink's records are read. Lateness is the sink's wall clock when the
read that brought a request's first byte returned, minus its
``Dejaq-Timestamp-Ms`` (the due time).
Per step: delivered, doubled, early, left behind (not posted by
``SETTLE_S`` after the last due time), lateness p50/p99/max, and the
broker's and the sink's CPU per message. A step holds at p99 <= plan.p99_ms
with none early or left behind (a smoke run judges no speed: there only
early and left behind count). Steps go up until one leaves messages behind
or its p99 passes ``SATURATED`` times the target. The figures: p99 at 1k/s,
and the highest rate that held.
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
from suite.harness import Ctx
from suite.plan import Plan
from suite.procstat import cpu_s
from suite.stats import lateness_summary

from dejaq.driver import Producer, TopicSettings, Webhook
from dejaq.driver.producer import Outgoing

SINK = Path(__file__).resolve().parents[1] / "suite" / "webhook_sink.py"
LEAD_MS = 1500  # the first message of a step is due this long after producing starts
BATCH = 1000
PAYLOAD = b"x" * 64
SETTLE_S = 10.0  # after a step's last due time, how long its stragglers may take
SATURATED = 10  # a step whose p99 is this many times the target ends the ramp


def bound_s(plan: Plan) -> float:
    return 30 + len(plan.webhook_rates) * (plan.webhook_step_s + LEAD_MS / 1000 + SETTLE_S + 5)


async def start_sink() -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(SINK), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 20)).decode()
    port = line.rsplit(" ", 1)[1].strip()
    return proc, f"http://127.0.0.1:{port}"


async def step(
    ctx: Ctx, http: aiohttp.ClientSession, sink: str, topic: str, rate: int, sink_pid: int
) -> dict[str, Any]:
    await http.post(f"{sink}/reset")
    n = max(1, int(rate * ctx.plan.webhook_step_s))
    start = int(time.time() * 1000) + LEAD_MS
    times = [start + (i * 1000) // rate for i in range(n)]
    async with Producer(ctx.client, topic) as producer:
        for i in range(0, n, BATCH):
            batch = [
                Outgoing(PAYLOAD, t, id=f"{rate}-{j}")
                for j, t in enumerate(times[i : i + BATCH], i)
            ]
            await producer.send_batch(batch)
    pids = (ctx.broker.pid, sink_pid)
    cpu_before = [cpu_s(p) for p in pids]
    deadline = time.monotonic() + LEAD_MS / 1000 + ctx.plan.webhook_step_s + SETTLE_S
    while time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        async with http.get(f"{sink}/count") as resp:
            count = (await resp.json())["count"]
        if count >= n and time.time() * 1000 > times[-1] + 500:
            break
    async with http.get(f"{sink}/stats") as resp:
        stats: dict[str, Any] = await resp.json()
    late = np.asarray(stats.get("latenesses", []), dtype=np.float64)
    broker_cpu, sink_cpu = (cpu_s(p) - c for p, c in zip(pids, cpu_before, strict=True))
    summary = lateness_summary(late, int((late < 0).sum()))
    fast_enough = summary.get("p99_ms", math.inf) <= ctx.plan.p99_ms
    held = (
        stats.get("count", 0) == n
        and not summary["early"]
        and (fast_enough or not ctx.plan.enforce_speed)
    )
    return {
        "rate": rate,
        "messages": n,
        "delivered": stats.get("count", 0),
        "left_behind": n - stats.get("count", 0),
        "doubled": stats.get("doubled", 0),
        "early": summary["early"],
        "lateness": summary,
        "broker_cpu_us_per_msg": round(broker_cpu * 1e6 / n, 1),
        "sink_cpu_us_per_msg": round(sink_cpu * 1e6 / n, 1),
        "held": held,
    }


async def run(ctx: Ctx) -> dict[str, Any]:
    plan = ctx.plan
    sink_proc, sink = await start_sink()
    steps: list[dict[str, Any]] = []
    topic = ""
    try:
        async with aiohttp.ClientSession() as http:
            hook = Webhook(f"{sink}/hook", concurrency=plan.webhook_concurrency)
            topic = await ctx.topic("webhooks", TopicSettings(webhook=hook))
            for rate in plan.webhook_rates:
                s = await step(ctx, http, sink, topic, rate, sink_proc.pid)
                steps.append(s)
                late = s["lateness"]
                ctx.log(
                    f"  webhooks {rate:>6}/s: {s['delivered']:>6}/{s['messages']} posted,"
                    f" p50 {late.get('p50_ms')} p99 {late.get('p99_ms')}"
                    f" max {late.get('max_ms')} ms, early {s['early']},"
                    f" broker {s['broker_cpu_us_per_msg']} us cpu/msg"
                    + ("" if s["held"] else "  (did not hold)")
                )
                if s["left_behind"] or late.get("p99_ms", math.inf) > SATURATED * plan.p99_ms:
                    break  # saturated: its backlog would spill into the next step
    finally:
        sink_proc.terminate()
        await sink_proc.wait()
        if topic:
            await ctx.drop(topic)
    held = [s["rate"] for s in steps if s["held"]]
    return {
        "concurrency": plan.webhook_concurrency,
        "step_s": plan.webhook_step_s,
        "steps": steps,
        "p99_ms_at_1k": next(
            (s["lateness"].get("p99_ms") for s in steps if s["rate"] == 1000), None
        ),
        "highest_rate_holding": max(held) if held else 0,
        "stopped_at": next((s["rate"] for s in steps if not s["held"]), None),
    }
