"""The CLI as a user runs it: ``dejaq consume TOPIC`` processes, one JSON line per delivery.

- ``at_rate``: ``cli_consumers`` (3) processes, ``cli_rate`` (1k) messages a
  second due for ``cli_step_s``: lateness p50 / p99 from the lines'
  ``received_at_ms - timestamp_ms`` (whole milliseconds).
- ``one_process``: one process while the rate steps up through ``cli_rates``,
  until it no longer keeps up (all delivered, at >= 95% of the rate).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from suite.fleets import CliFleet
from suite.harness import Ctx
from suite.plan import Plan
from suite.ramp import Rig, Rule, correct, keeps_up, on_schedule, ramp


def bound_s(plan: Plan) -> float:
    per_step = plan.cli_step_s + plan.lead_ms / 1000 + plan.drain_s + 10
    return 90 + (1 + len(plan.cli_rates)) * per_step


async def _ramp(
    ctx: Ctx, label: str, processes: int, rates: Sequence[int], rule: Rule
) -> dict[str, Any]:
    plan = ctx.plan
    topic = await ctx.topic(label)
    try:
        producer = await ctx.producer()
        fleet = await CliFleet(ctx.broker.address, topic, processes, ctx.workdir).start(ctx.client)
        try:
            rig = Rig(f"{ctx.backend} cli x{processes}", producer, fleet, ctx.probe(), topic)
            out = await ramp(rig, rates, plan.cli_step_s, plan.lead_ms, plan.drain_s, rule)
        finally:
            await fleet.stop()  # SIGTERM: the CLI flushes its acks and says goodbye
        out["unreadable_lines"] = fleet.bad_lines
        out["left_in_topic"] = await ctx.left_in(topic)
    finally:
        await ctx.drop(topic)
    return {"processes": processes, **out}


async def run(ctx: Ctx) -> dict[str, Any]:
    plan = ctx.plan
    fast = plan.enforce_speed
    at_rate = await _ramp(
        ctx, "cli", plan.cli_consumers, [plan.cli_rate], on_schedule if fast else correct
    )
    one = await _ramp(ctx, "cli-one", 1, plan.cli_rates, keeps_up if fast else correct)
    return {"at_rate": at_rate, "one_process": one}
