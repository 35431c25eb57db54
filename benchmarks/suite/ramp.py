"""Steps of steady load: a rate asked, held for a while, and what came of it.

A step at rate R holding S seconds: the producer process schedules ``R x S``
messages (every 100 ms, R/10 due evenly over the next 100 ms, ``lead_ms``
ahead). The harness reads the server's counters when the first message is due
and when the last one is, then waits until every message produced has been
delivered (or ``drain_s`` after the last due time), taking what the consumer
processes recorded. Lateness = the consumer's clock when it took a delivery -
the due time; a delivery taken at an integer millisecond below its due time is
early. Each step gets a fresh id prefix, so stragglers of an earlier step are
told apart.

A ramp steps R up through ``rates`` and stops after the first step that does
not hold (the rule says why); its result is the highest rate that held.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dejaq.core.clock import now_ms

from . import procstat
from .cpu_cost import Meter
from .fleets import Fleet
from .probes import Probe
from .stats import lateness_summary, rate
from .workers import Worker

START_SLACK_MS = 300  # the producer gets the step command this long before its first tick
DRAIN_POLL_S = 0.1
KEEP_UP_SHARE = 0.95
FINAL_DRAIN_S = 60.0  # after a step left messages behind: until they count as lost
Rule = Callable[[dict[str, Any]], str | None]  # a step's figures -> why it failed, or None


@dataclass
class Rig:
    """What a ramp drives: a producer process, consumer processes, a server to probe."""

    name: str
    producer: Worker
    fleet: Fleet
    probe: Probe
    topic: str = ""  # the rival has none
    keys: int = 0  # messages keyed round this many keys (0: none)
    headers: int = 0  # small headers on each message (0: none)


def correct(step: dict[str, Any]) -> str | None:
    """Nothing early, nothing left behind (all a smoke run checks)."""
    if step["early"]:
        return f"{step['early']} delivered EARLY"
    if step["left_behind"]:
        return f"{step['left_behind']} left behind"
    return None


def on_schedule(step: dict[str, Any]) -> str | None:
    """Correct, and every produce frame answered before its first message was due:
    else lateness would measure the producer (a harness limit, not the backend's)."""
    why = correct(step)
    if why is None and step["producer"]["late_frames"]:
        why = f"the producer fell behind ({step['producer']['late_frames']} frames answered late)"
    return why


def p99_within(limit_ms: float) -> Rule:
    def rule(step: dict[str, Any]) -> str | None:
        why = on_schedule(step)
        p99 = step["lateness"].get("p99_ms")
        if why is None and (p99 is None or p99 > limit_ms):
            why = f"p99 {p99} ms > {limit_ms:g} ms"
        return why

    return rule


def keeps_up(step: dict[str, Any]) -> str | None:
    """All delivered, at no less than 95% of the rate asked, over the step."""
    why = on_schedule(step)
    if why is None and step["delivered_per_s"] < KEEP_UP_SHARE * step["rate"]:
        return f"delivered {step['delivered_per_s']:,}/s < 95% of {step['rate']:,}/s"
    return why


async def _until(at_ms: float) -> None:
    delay = (at_ms - time.time_ns() / 1e6) / 1000
    if delay > 0:
        await asyncio.sleep(delay)


@dataclass
class Seen:
    """What the consumers delivered of one step (by its id prefix)."""

    prefix: str
    ids: set[str] = field(default_factory=set)
    received_ns: list[int] = field(default_factory=list)
    due_ms: list[int] = field(default_factory=list)
    others: int = 0  # deliveries of earlier steps' messages

    async def drain(self, fleet: Fleet, expected: int, deadline_ms: float) -> None:
        """Take what the consumers saw until ``expected`` distinct ids or the deadline."""
        while True:
            for got, d, i in await fleet.take():
                if not i.startswith(self.prefix):
                    self.others += 1
                    continue
                self.ids.add(i)
                self.received_ns.append(got)
                self.due_ms.append(d)
            if len(self.ids) >= expected or now_ms() > deadline_ms:
                return
            await asyncio.sleep(DRAIN_POLL_S)


async def step(
    rig: Rig,
    per_s: int,
    seconds: float,
    lead_ms: int,
    drain_s: float,
    index: int,
    meter: Meter | None = None,
) -> tuple[dict[str, Any], Seen]:
    """One step; with a ``meter``, every process's CPU a delivered message over
    the step's steady window too (``window`` in the figures)."""
    seen = Seen(f"s{index:02d}-")
    start_ms = now_ms() + START_SLACK_MS
    first_due = start_ms + lead_ms
    last_due = first_due + seconds * 1000
    command = (
        "steady",
        rig.topic,
        per_s,
        seconds,
        start_ms,
        lead_ms,
        seen.prefix,
        rig.keys,
        rig.headers,
    )
    producing = asyncio.create_task(rig.producer.ask(command, seconds + lead_ms / 1000 + 120))
    # The meter reads inside the step, away from the probe's scrapes at its ends.
    metering = asyncio.create_task(meter.watch(first_due, last_due)) if meter else None
    pids = [rig.producer.pid, *rig.fleet.pids()]
    try:
        await _until(first_due)
        a = await rig.probe.sample()
        cpu_a, at_a = [procstat.cpu_s(p) for p in pids], time.monotonic()
        await _until(last_due)
        b = await rig.probe.sample()
        cpu_b, at_b = [procstat.cpu_s(p) for p in pids], time.monotonic()
        produced = await producing
        if metering is not None:
            await metering
    finally:
        for task in (producing, metering):
            if task is not None and not task.done():
                task.cancel()
    await seen.drain(rig.fleet, produced["accepted"], last_due + drain_s * 1000)
    got_ns = np.array(seen.received_ns, dtype=np.int64)
    due_ms = np.array(seen.due_ms, dtype=np.int64)
    early = int(np.count_nonzero(got_ns // 1_000_000 < due_ms))
    late = lateness_summary(got_ns / 1e6 - due_ms, early)
    last_ms = float(got_ns.max()) / 1e6 if got_ns.size else float(first_due)
    span_s = max(seconds, (last_ms - first_due) / 1000)
    delivered = len(seen.ids)
    figures = {
        "rate": per_s,
        "seconds": seconds,
        "produced": produced["accepted"],
        "delivered": delivered,
        "deliveries": got_ns.size,
        "duplicates": got_ns.size - delivered,
        "left_behind": produced["accepted"] - delivered,
        "early": early,
        "from_earlier_steps": seen.others,
        "delivered_per_s": rate(delivered, span_s),
        "lag_at_end_ms": round(last_ms - last_due, 1) if got_ns.size else None,
        "lateness": late,
        "producer": produced,
        "server": rig.probe.rates(a, b),
        # CPU % of one core over the step: is the load itself the limit?
        "load_cpu_percent": {
            "producer": round(100 * (cpu_b[0] - cpu_a[0]) / (at_b - at_a), 1),
            "consumers": [
                round(100 * (y - x) / (at_b - at_a), 1)
                for x, y in zip(cpu_a[1:], cpu_b[1:], strict=True)
            ],
        },
    }
    if meter is not None:
        figures["window"] = meter.figures(got_ns)
    return figures, seen


def line(name: str, s: dict[str, Any]) -> str:
    late, server, load = s["lateness"], s["server"], s["load_cpu_percent"]
    frames = server.get("frames_per_s")
    cost = f"frames {frames:,}/s" if frames is not None else "frames n/a"
    if "redis_commands_per_s" in server:
        cost = f"redis cmds {server['redis_commands_per_s']:,}/s"
    verdict = "holds" if s.get("holds") else f"FAILS: {s.get('why')}"
    stored = server.get("store_cpu_percent")
    store = "" if stored is None else f", storage server {stored}"
    masters = {k: v for k, v in (server.get("store_nodes") or {}).items() if "master" in k}
    if masters:
        each = "/".join(
            f"{v['cpu_percent']}% {v['cpu_us_per_message']} us" for v in masters.values()
        )
        store += f" (masters {each} a message)"
    return (
        f"[{name}] {s['rate']:>7,}/s asked, {s['delivered_per_s']:>7,}/s delivered;"
        f" lateness p50 {late.get('p50_ms')} p99 {late.get('p99_ms')} max {late.get('max_ms')} ms;"
        f" early {s['early']}, left behind {s['left_behind']};"
        f" {cost}; CPU % server {server.get('cpu_percent')}{store}, producer"
        f" {load['producer']}, consumers {'/'.join(str(c) for c in load['consumers'])}"
        f" -> {verdict}"
    )


async def ramp(
    rig: Rig,
    rates: Sequence[int],
    seconds: float,
    lead_ms: int,
    drain_s: float,
    rule: Rule,
    final_drain_s: float = FINAL_DRAIN_S,
    meter: Meter | None = None,
) -> dict[str, Any]:
    """Step up through ``rates``; stop after the first step the rule fails.

    A step that left messages behind (late, not necessarily lost) gets
    ``final_drain_s`` more: what is still missing then is ``lost``. A ``meter``
    reads each step's CPU a delivered message."""
    steps: list[dict[str, Any]] = []
    best: int | None = None
    stopped = None
    lost = 0
    for n, per_s in enumerate(rates):
        s, seen = await step(rig, per_s, seconds, lead_ms, drain_s, n, meter)
        why = rule(s)
        s["holds"], s["why"] = why is None, why
        steps.append(s)
        print(line(rig.name, s), flush=True)
        if s["left_behind"]:
            await seen.drain(rig.fleet, s["produced"], now_ms() + final_drain_s * 1000)
            lost += s["produced"] - len(seen.ids)
        if why is not None:
            stopped = f"{per_s:,}/s: {why}"
            break
        best = per_s
    return {"steps": steps, "best_rate": best, "stopped_at": stopped, "lost": lost}
