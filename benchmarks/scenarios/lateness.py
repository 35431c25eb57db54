"""Lateness at steady due rates, and for a burst due at one millisecond.

- ``steady``: at rate R, ``R x steady_s`` messages whose due times step
  uniformly (message i is due at ``T0 + i * 1000 / R`` ms) are produced ahead
  of ``T0``, consumed by a consumer connected beforehand with a window of
  ``credits`` and acked frame by frame. ``T0`` is far enough ahead that the
  produce is over before it (``produced_before_first_due`` says whether it was).
- ``burst``: ``burst`` messages all due at the same millisecond ``T0``
  (the campaign herd): time to drain (last delivery - T0) and lateness.

Lateness is ``received - due`` in ms, taken in the consumer when the frame
arrives (so it includes the loopback hop and the client's read). A negative
value is an early delivery. ``achieved_per_s`` = delivered / (last delivery -
T0), at least the schedule's span; ``kept_up`` means everything arrived and
at no less than 95% of the asked rate; ``lag_at_end_ms`` is how long after
the last due time the last message arrived.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from suite import wire
from suite.harness import Ctx
from suite.stats import cpu, lateness_summary, rate

BATCH = 1000
KEEP_UP = 0.95


async def scheduled(
    ctx: Ctx, label: str, n: int, offsets: Callable[[int, int], Sequence[int]], span_ms: int
) -> dict[str, Any]:
    """Produce ``n`` messages due at ``T0 + offsets(start, count)`` ahead of T0; consume all."""
    topic = await ctx.topic(label)
    tally = wire.Tally(n)
    try:
        with cpu(ctx.broker.pid) as used:
            r = await _scheduled(ctx, topic, tally, offsets, span_ms)
    finally:
        await ctx.drop(topic)
    return {**r, **used.as_dict()}


async def _scheduled(
    ctx: Ctx,
    topic: str,
    tally: wire.Tally,
    offsets: Callable[[int, int], Sequence[int]],
    span_ms: int,
) -> dict[str, Any]:
    n = tally.expected
    lead_ms = round(ctx.lead_s(n) * 1000)
    async with wire.LeanConsumer(ctx.client, topic, ctx.plan.credits, tally):
        t0 = wire.now_ms() + lead_ms

        def due(start: int, count: int) -> list[int]:
            return [t0 + o for o in offsets(start, count)]

        source = wire.frames(topic, due, n, BATCH)
        done = await wire.produce(ctx.client, source, ctx.plan.in_flight, cap_s=120)
        produced_in_time = wire.now_ms() < t0
        wait_s = (t0 + span_ms - wire.now_ms()) / 1000 + ctx.plan.drain_timeout_s
        timed_out = False
        try:
            await asyncio.wait_for(tally.done.wait(), max(wait_s, 1.0))
        except TimeoutError:
            timed_out = True
    late = lateness_summary(tally.values())
    last_ms = tally.last_ns / 1e6
    return {
        "messages": n,
        "accepted": done.accepted,
        "delivered": tally.delivered,
        "duplicates": tally.duplicates,
        "failed_acks": tally.failed_acks,
        "timed_out": timed_out,
        "lead_ms": lead_ms,
        "produce_s": round(done.seconds, 3),
        "produced_before_first_due": produced_in_time,
        "last_delivery_after_t0_ms": round(last_ms - t0, 1) if tally.last_ns else None,
        "lag_at_end_ms": round(last_ms - t0 - span_ms, 1) if tally.last_ns else None,
        "early": late.get("early", 0),
        "lateness": late,
    }


async def steady(ctx: Ctx, per_s: int) -> dict[str, Any]:
    n = max(1, round(per_s * ctx.plan.steady_s))
    span_ms = round(ctx.plan.steady_s * 1000)

    def offsets(start: int, count: int) -> list[int]:
        return [(i * 1000) // per_s for i in range(start, start + count)]

    r = await scheduled(ctx, f"steady-{per_s}", n, offsets, span_ms)
    after = r["last_delivery_after_t0_ms"] or 0.0
    achieved = r["delivered"] / max(after, span_ms) * 1000 if r["delivered"] else 0.0
    r["rate_per_s"] = per_s
    r["achieved_per_s"] = round(achieved)
    r["kept_up"] = r["delivered"] == n and achieved >= KEEP_UP * per_s
    return r


async def burst(ctx: Ctx) -> dict[str, Any]:
    n = ctx.plan.burst
    r = await scheduled(ctx, "burst", n, lambda _s, count: [0] * count, 0)
    drain_ms = r["last_delivery_after_t0_ms"]
    r["drain_s"] = round(drain_ms / 1000, 3) if drain_ms else None
    r["drain_msgs_per_s"] = rate(r["delivered"], drain_ms / 1000) if drain_ms else 0
    return r


async def run(ctx: Ctx) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for per_s in ctx.plan.rates:
        r = out[str(per_s)] = await steady(ctx, per_s)
        late = r["lateness"]
        verdict = "kept up" if r["kept_up"] else "CANNOT KEEP UP"
        ctx.log(
            f"  {per_s:>6,} due/s: p50 {late.get('p50_ms')} p99 {late.get('p99_ms')}"
            f" max {late.get('max_ms')} ms, early {r['early']},"
            f" achieved {r['achieved_per_s']:,}/s ({verdict})"
        )
    b = out["burst"] = await burst(ctx)
    ctx.log(
        f"  burst {ctx.plan.burst:,}: drained in {b['drain_s']} s"
        f" ({b['drain_msgs_per_s']:,} msgs/s), p99 {b['lateness'].get('p99_ms')} ms,"
        f" early {b['early']}"
    )
    return out
