"""Steady: R messages a second becoming due, consumer processes acking as they go.

The scenario that matters (DESIGN.md, "Steady high rate"). One producer process
schedules through ``Producer.send_batch``; ``consumers`` processes (3 by
default) each run the plain loop with the driver's defaults
(``async for d in consumer: await d.ack()``). R steps up through the plan's
rates, each held ``step_s`` seconds, until a step fails: p99 lateness over
``p99_ms``, any early delivery, anything left behind after ``drain_s``. The
figure is the highest rate that held. The rival runs the same ramp
(``scenarios/poller.py``).
"""

from __future__ import annotations

from typing import Any

from suite.fleets import WorkerFleet
from suite.harness import Ctx
from suite.plan import Plan
from suite.ramp import Rig, Rule, correct, p99_within, ramp
from suite.workers import consumer_main


def rule(plan: Plan) -> Rule:
    return p99_within(plan.p99_ms) if plan.enforce_speed else correct


def bound_s(plan: Plan) -> float:
    """A time bound for a whole ramp."""
    per_step = plan.step_s + plan.lead_ms / 1000 + plan.drain_s + 10
    return 60 + len(plan.rates) * per_step


async def run(ctx: Ctx) -> dict[str, Any]:
    plan = ctx.plan
    topic = await ctx.topic("steady")
    try:
        producer = await ctx.producer()
        fleet = await WorkerFleet(
            f"{ctx.backend}-consumer", plan.consumers, consumer_main, ctx.broker.address, topic
        ).start()
        try:
            rig = Rig(
                ctx.backend,
                producer,
                fleet,
                ctx.probe(),
                topic,
                plan.steady_keys,
                plan.steady_headers,
            )
            out = await ramp(rig, plan.rates, plan.step_s, plan.lead_ms, plan.drain_s, rule(plan))
        finally:
            await fleet.stop()  # the consumers close: their acks are flushed
        out["left_in_topic"] = await ctx.left_in(topic)
    finally:
        await ctx.drop(topic)
    return {
        "consumers": plan.consumers,
        "step_s": plan.step_s,
        "keys": plan.steady_keys,
        "headers": plan.steady_headers,
        **out,
    }
