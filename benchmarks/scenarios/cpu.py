"""CPU: what a delivered message costs every process, end to end, at one steady rate.

The steady scenario's load (a producer process through ``Producer.send_batch``,
``consumers`` processes running the plain loop) holds ``cpu_rate`` msgs/s
for ``cpu_step_s``; over the step's middle half (``suite/cpu_cost.py``) each
process's CPU from ``/proc`` (the producer, the broker, each consumer, the
storage server's processes) is divided by the deliveries the consumers took
meanwhile. The rival runs the same step: its producer, its pollers and its
redis-server. A step checks correctness only (nothing early, nothing left
behind): the figure is a cost, not a limit, read where the load kept up
(``kept_up``: delivered in the window at >= 95% of the rate). The messages
carry keys and headers as the steady scenario's do (``--steady-keys``,
``--steady-headers``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from suite import procstat
from suite.cpu_cost import BROKER, CONSUMER, PRODUCER, STORAGE, Meter, Reader
from suite.fleets import WorkerFleet
from suite.harness import Ctx
from suite.plan import Plan
from suite.ramp import FINAL_DRAIN_S, KEEP_UP_SHARE, Rig, correct, ramp
from suite.workers import consumer_main

from . import poller


def bound_s(plan: Plan) -> float:
    """A time bound for one step, its start-up and a final drain."""
    return 60 + plan.cpu_step_s + plan.lead_ms / 1000 + plan.drain_s + FINAL_DRAIN_S


def readers(
    producer: int, consumers: Sequence[int], broker: int | None, storage: Reader | None
) -> dict[str, Reader]:
    """A CPU reader a process of the load (None: the load has no such process)."""
    found: dict[str, Reader] = {PRODUCER: partial(procstat.cpu_s, producer)}
    if broker is not None:
        found[BROKER] = partial(procstat.cpu_s, broker)
    for n, pid in enumerate(consumers):
        found[f"{CONSUMER}{n}"] = partial(procstat.cpu_s, pid)
    if storage is not None:
        found[STORAGE] = storage
    return found


def storage_reader(pid: int | None, nodes: Sequence[int] = ()) -> Reader | None:
    """The storage server's processes as one: a server's process tree
    (PostgreSQL's postmaster with a backend a connection), or a Redis Cluster's
    nodes; None when the storage runs inside the broker."""
    if pid:
        return partial(procstat.tree_cpu_s, pid)
    if nodes:
        return lambda: sum(procstat.cpu_s(node) for node in nodes)
    return None


async def measure(rig: Rig, meter: Meter, plan: Plan) -> dict[str, Any]:
    out = await ramp(
        rig, [plan.cpu_rate], plan.cpu_step_s, plan.lead_ms, plan.drain_s, correct, meter=meter
    )
    window = (out["steps"][0].get("window") or {}) if out["steps"] else {}
    delivered = window.get("delivered_per_s")
    figures = {
        "rate": plan.cpu_rate,
        "step_s": plan.cpu_step_s,
        "consumers": plan.consumers,
        "delivered_per_s": delivered,
        # Behind the rate, the producer's CPU is spread over fewer deliveries
        # than it produced, and a backlog is delivered in fuller frames.
        "kept_up": delivered is not None and delivered >= KEEP_UP_SHARE * plan.cpu_rate,
        "us_per_message": window.get("us_per_message"),
        **out,
    }
    us = figures["us_per_message"] or {}
    print(
        f"[{rig.name}] cpu: {us.get('sum')} µs a delivered message (producer"
        f" {us.get(PRODUCER)}, broker {us.get(BROKER)}, consumers {us.get('consumers')},"
        f" storage {us.get(STORAGE)})",
        flush=True,
    )
    return figures


async def run(ctx: Ctx) -> dict[str, Any]:
    plan = ctx.plan
    topic = await ctx.topic("cpu")
    try:
        producer = await ctx.producer()
        fleet = await WorkerFleet(
            f"{ctx.backend}-cpu-consumer", plan.consumers, consumer_main, ctx.broker.address, topic
        ).start()
        try:
            storage = storage_reader(ctx.store_pid, [pid for _, pid, _ in ctx.store_nodes])
            meter = Meter(readers(producer.pid, fleet.pids(), ctx.broker.pid, storage))
            rig = Rig(
                ctx.backend,
                producer,
                fleet,
                ctx.probe(),
                topic,
                plan.steady_keys,
                plan.steady_headers,
            )
            out = await measure(rig, meter, plan)
        finally:
            await fleet.stop()  # the consumers close: their acks are flushed
        out["left_in_topic"] = await ctx.left_in(topic)
    finally:
        await ctx.drop(topic)
    return out


async def rival(plan: Plan) -> dict[str, Any]:
    """The same step on the Redis sorted-set poller: its producer, pollers and redis-server."""
    async with poller.rig(plan) as (rig, served):
        storage = storage_reader(served.pid)
        meter = Meter(readers(rig.producer.pid, rig.fleet.pids(), None, storage))
        out = await measure(rig, meter, plan)
    return {"processes": plan.consumers, "poll_ms": plan.poll_ms, **out}
