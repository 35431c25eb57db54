"""Priority topics: produce-to-receive latency with idle consumers, and the
order a backlog is received in.

- latency: a producer process sends one message at a time (``Producer.send``,
  each answered before the next) at ``priority_rate`` a second for
  ``priority_s`` seconds, priorities mixed over ``priority_levels``; consumer
  processes (the plain loop) wait idle for them. The figure is received minus
  sent (one host, one clock): p50 / p99 / max, target p99 <= 2 ms on memory.
  Apart, received minus the time the broker made each message available; for
  comparison the same sender on a timeline (due at once, priority 0); and the
  floor: a unary call's round trip (``Admin.list_topics``) from the producer
  process at the same pace, the consumers idle (a message crosses the wire
  twice, producer to broker to consumer: about one round trip at least).
  A second floor in the real path's shape: a bare grpc.aio relay process with
  no broker logic (``suite/relay.py``), the same pace from a sender process
  (each frame answered before the next) to as many receiver processes, the
  frame forwarded at once; received minus sent, p50 / p99 / max and lost.
  The floor is gRPC in Python on this machine; what the priority latency adds
  above it is dejaq's work (driver and broker).
- backlog: ``priority_backlog`` messages of mixed priorities produced while no
  consumer is connected, then received by one consumer process. Every pair
  received less urgent first is an inversion (0 expected: strict priority
  holds per broker), and so is a message received before an older one of its
  priority (FIFO within a priority, by the broker's millisecond).

Lost messages fail the run as everywhere, and so does an inversion.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from suite import relay
from suite.fleets import WorkerFleet
from suite.harness import Ctx
from suite.plan import Plan
from suite.prioritized import tag_of
from suite.stats import lateness_summary
from suite.workers import Record, Worker, consumer_main

from dejaq.core.model import KIND_PRIORITY, TopicSettings

POLL_S = 0.05


def bound_s(plan: Plan) -> float:
    return 120 + 3 * plan.priority_s + plan.priority_backlog / 500


async def run(ctx: Ctx) -> dict[str, Any]:
    return {
        "latency": await latency(ctx),
        "timeline_latency": await latency(ctx, timeline=True),
        "round_trip": await round_trip(ctx),
        "relay_floor": await relay_floor(ctx),
        "backlog": await backlog(ctx),
    }


async def round_trip(ctx: Ctx) -> dict[str, Any]:
    """The floor under produce-to-receive: a unary call's round trip through
    the driver (``Admin.list_topics``) from the producer process, at the
    trickle's pace, with the consumer processes connected and idle."""
    plan = ctx.plan
    seconds = min(plan.priority_s, 5.0)
    topic = await ctx.topic("round-trip", _settings(plan))
    try:
        producer = await ctx.producer()
        fleet = await WorkerFleet(
            f"{ctx.backend}-round-trip", plan.consumers, consumer_main, ctx.broker.address, topic
        ).start()
        try:
            command = ("round_trips", plan.priority_rate, seconds)
            trips = await producer.ask(command, bound_s(plan))
        finally:
            await fleet.stop()
    finally:
        await ctx.drop(topic)
    out = lateness_summary(np.array(trips, dtype=np.float64), 0)
    ctx.log(
        f"  wire floor (unary round trip through the driver): {len(trips):,} calls at"
        f" {plan.priority_rate}/s, round trip p50 {out.get('p50_ms')} ms,"
        f" p99 {out.get('p99_ms')} ms"
    )
    return out


async def relay_floor(ctx: Ctx) -> dict[str, Any]:
    """The floor in the real path's shape, without dejaq: a bare grpc.aio relay
    process (``suite/relay.py``) between a sender process, one frame at a time
    at the trickle's pace, and ``plan.consumers`` receiver processes."""
    plan = ctx.plan
    seconds = min(plan.priority_s, 5.0)
    server = Worker(f"{ctx.backend}-relay", relay.relay_main)
    try:
        await server.ready()
        address = await server.ask(("address",), bound_s(plan))
        fleet = await WorkerFleet(
            f"{ctx.backend}-relay-receiver", plan.consumers, relay.receiver_main, address
        ).start()
        sender = Worker(f"{ctx.backend}-relay-sender", relay.sender_main, address)
        try:
            await sender.ready()
            sent = await sender.ask(("trickle", plan.priority_rate, seconds), bound_s(plan))
        except BaseException:
            await fleet.stop()
            raise
        finally:
            await sender.stop()
        got = await _receive(ctx, fleet, sent["sent"], time.monotonic() + plan.drain_s)
    finally:
        await server.stop()
    out: dict[str, Any] = {
        "label": "wire floor (bare grpc.aio relay, no broker)",
        "rate": plan.priority_rate,
        "seconds": seconds,
        "receivers": plan.consumers,
        "sender": sent,
        **_delivered(got, relay.PREFIX, sent["sent"])[1],
    }
    lat = out["latency"]
    ctx.log(
        f"  wire floor (bare grpc.aio relay, no broker): {out['delivered']:,} frames at"
        f" {plan.priority_rate}/s to {plan.consumers} receivers: p50 {lat.get('p50_ms')} ms,"
        f" p99 {lat.get('p99_ms')} ms, max {lat.get('max_ms')} ms, lost {out['lost']}"
    )
    return out


def _delivered(got: list[Record], prefix: str, sent: int) -> tuple[list[Record], dict[str, Any]]:
    """Each id's first record, and what they say: delivered, duplicates, lost
    (of ``sent``) and ``latency``, received minus the send time in the id (ms)."""
    first: dict[str, Record] = {}
    for record in got:
        first.setdefault(record[2], record)
    records = list(first.values())
    sent_ns = np.array([tag_of(prefix, r[2]).sent_ns for r in records], dtype=np.int64)
    received_ns = np.array([r[0] for r in records], dtype=np.int64)
    return records, {
        "delivered": len(records),
        "duplicates": len(got) - len(records),
        "lost": sent - len(records),
        "latency": lateness_summary((received_ns - sent_ns) / 1e6, 0),
    }


def _settings(plan: Plan) -> TopicSettings:
    return TopicSettings(kind=KIND_PRIORITY, priorities=plan.priority_levels)


async def _receive(ctx: Ctx, fleet: WorkerFleet, expected: int, deadline: float) -> list[Record]:
    """What the fleet received until ``expected`` arrived or ``deadline`` (monotonic)."""
    got: list[Record] = []
    ids: set[str] = set()
    try:
        while len(ids) < expected and time.monotonic() < deadline:
            await asyncio.sleep(POLL_S)
            for record in await fleet.take():
                got.append(record)
                ids.add(record[2])
    finally:
        got += await fleet.stop()
    return got


async def latency(ctx: Ctx, timeline: bool = False) -> dict[str, Any]:
    """Sent one at a time to idle consumers; on a timeline (``timeline``) as a
    baseline: due at once, all priority 0."""
    plan = ctx.plan
    prefix = "q-"
    levels = 1 if timeline else plan.priority_levels
    label = "timeline-latency" if timeline else "priority-latency"
    topic = await ctx.topic(label, TopicSettings() if timeline else _settings(plan))
    try:
        producer = await ctx.producer()
        fleet = await WorkerFleet(
            f"{ctx.backend}-priority", plan.consumers, consumer_main, ctx.broker.address, topic
        ).start()
        command = ("trickle", topic, plan.priority_rate, plan.priority_s, levels)
        sending = asyncio.create_task(producer.ask((*command, prefix), bound_s(plan)))
        try:
            # Received while sent: the consumers are polled meanwhile, so their
            # records never pile up.
            got: list[Record] = []
            while not sending.done():
                await asyncio.sleep(POLL_S)
                got += await fleet.take()
            produced = sending.result()
        except BaseException:
            sending.cancel()
            await fleet.stop()
            raise
        ids = {r[2] for r in got}
        deadline = time.monotonic() + plan.drain_s
        got += await _receive(ctx, fleet, produced["accepted"] - len(ids), deadline)
        left = await ctx.left_in(topic)
    finally:
        await ctx.drop(topic)
    records, delivered = _delivered(got, prefix, produced["accepted"])
    received_ns = np.array([r[0] for r in records], dtype=np.int64)
    available_ms = np.array([r[1] for r in records], dtype=np.int64)
    waited_ms = received_ns / 1e6 - available_ms
    out: dict[str, Any] = {
        "rate": plan.priority_rate,
        "seconds": plan.priority_s,
        "kind": "timeline" if timeline else "priority",
        "priorities": levels,
        "consumers": plan.consumers,
        "producer": produced,
        **delivered,
        "left_in_topic": left,
        "since_available": lateness_summary(waited_ms, 0),
    }
    lat = out["latency"]
    ctx.log(
        f"  {out['kind']}: {len(records):,} sent one at a time at {plan.priority_rate}/s,"
        f" {levels} priorities, {plan.consumers} idle consumers:"
        f" produce-to-receive p50 {lat.get('p50_ms')} ms, p99 {lat.get('p99_ms')} ms,"
        f" max {lat.get('max_ms')} ms"
    )
    return out


def inversions(priorities: Sequence[int], levels: int) -> int:
    """Pairs received in the wrong order: a less urgent one (higher number) before."""
    seen = np.zeros(levels + 1, dtype=np.int64)
    total = 0
    for p in priorities:
        total += int(seen[p + 1 :].sum())
        seen[p] += 1
    return total


def fifo_inversions(priorities: Sequence[int], available_ms: Sequence[int]) -> int:
    """Messages received after a younger one of their own priority."""
    newest: dict[int, int] = {}
    total = 0
    for p, at in zip(priorities, available_ms, strict=True):
        if at < newest.get(p, at):
            total += 1
        newest[p] = max(newest.get(p, at), at)
    return total


async def backlog(ctx: Ctx) -> dict[str, Any]:
    plan = ctx.plan
    prefix = "b-"
    n = plan.priority_backlog
    topic = await ctx.topic("priority-backlog", _settings(plan))
    try:
        producer = await ctx.producer()
        command = ("backlog", topic, n, plan.priority_levels, prefix)
        produced = await producer.ask(command, bound_s(plan))
        waiting = await ctx.left_in(topic)
        started = time.monotonic()
        fleet = await WorkerFleet(
            f"{ctx.backend}-priority-backlog", 1, consumer_main, ctx.broker.address, topic
        ).start()
        got = await _receive(ctx, fleet, produced["accepted"], started + bound_s(plan) / 2)
        took_s = time.monotonic() - started
        left = await ctx.left_in(topic)
    finally:
        await ctx.drop(topic)
    first: dict[str, Record] = {}
    for record in got:
        first.setdefault(record[2], record)
    records = list(first.values())
    priorities = [tag_of(prefix, r[2]).priority for r in records]
    pairs = inversions(priorities, plan.priority_levels)
    fifo = fifo_inversions(priorities, [r[1] for r in records])
    out: dict[str, Any] = {
        "messages": n,
        "priorities": plan.priority_levels,
        "produced": produced["accepted"],
        "waiting_before_consumer": waiting,
        "delivered": len(records),
        "duplicates": len(got) - len(records),
        "lost": produced["accepted"] - len(records),
        "left_in_topic": left,
        "inversions": pairs,
        "fifo_inversions": fifo,
        "received_in_s": round(took_s, 2),
    }
    ctx.log(
        f"  priority backlog: {len(records):,} of {n:,} received by one consumer in"
        f" {took_s:.2f} s: {pairs} priority inversions, {fifo} FIFO inversions"
    )
    return out
