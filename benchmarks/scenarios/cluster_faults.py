"""Faults of the storage cluster under a broker: a master's ``kill -9``, and a live reshard.

Each fault gets a fresh Redis Cluster (3 masters, 3 replicas: ``suite.backends``,
as the ``redis-cluster`` backend starts it) and a broker process on it with
``?wait_replicas=1``. A producer sends ``RATE`` msgs/s due ``DUE_AFTER_MS``
later through the driver, a consumer acks as it goes, for ``plan.step_s``;
``FAULT_AT_S`` in (half the run in a smoke run):

- failover  the master serving the topic's first slot is killed (SIGKILL); once
            its replica has taken over it is started again and rejoins as a
            replica (with WAIT 1 its shard takes writes again only then)
- reshard   ``redis-cli --cluster reshard`` moves ``RESHARD_SLOTS`` hash slots
            (the topic's first slot among them) from that master to another

Figures: acknowledged produces, delivered, lost (acknowledged, never delivered
after the drain), early (received before due), the longest stall (the longest
gap between two deliveries while the producer ran), the latest first delivery
(after its due time: a lease a failed pass took comes back when it runs out),
deliveries again (an ack refused during the fault: after the lease) and how
long the fault took.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from suite.backends import Unavailable, redis_cluster_store
from suite.broker import broker
from suite.plan import Plan

from dejaq.core.errors import DejaqError
from dejaq.driver import Admin, Client, Consumer, Producer
from dejaq.driver.producer import Outgoing
from dejaq.storage_plugins.redis.keys import Slot
from dejaq.storage_plugins.redis.options import CLUSTER_TOPIC_SLOTS

FAULTS = ("failover", "reshard")
RATE = 500
BATCH = 10
DUE_AFTER_MS = 100
FAULT_AT_S = 3.0
RESHARD_SLOTS = 1000
DRAIN_S = 60.0
TOPIC = "faults"


def bound_s(plan: Plan) -> float:
    return len(FAULTS) * (plan.step_s + DRAIN_S + 120)


@dataclass
class Tally:
    produced: dict[str, int] = field(default_factory=dict)  # id -> due
    delivered: set[str] = field(default_factory=set)
    early: int = 0
    again: int = 0  # deliveries after the first (an ack refused, a lease stranded)
    gaps: list[float] = field(default_factory=list)  # seconds between deliveries
    latest_s: float = 0.0  # the latest first delivery after its due time
    last: float | None = None
    producing: bool = True

    def got(self, id: str, due: int, received: int) -> None:
        now = time.monotonic()
        if self.last is not None and self.producing:
            self.gaps.append(now - self.last)
        self.last = now
        self.early += received < due
        if id in self.delivered:
            self.again += 1
            return
        self.latest_s = max(self.latest_s, (received - due) / 1000)
        self.delivered.add(id)


async def _produce(producer: Producer, tally: Tally, seconds: float) -> None:
    started = time.monotonic()
    n = 0
    while time.monotonic() - started < seconds:
        due = int(time.time() * 1000) + DUE_AFTER_MS
        batch = [Outgoing(b"x" * 100, due, id=f"m{n + i:07d}") for i in range(BATCH)]
        n += BATCH
        try:
            results = await producer.send_batch(batch)
        except DejaqError:
            continue  # not acknowledged: not counted
        for m, r in zip(batch, results, strict=True):
            if r.error is None:
                tally.produced[m.id] = m.timestamp_ms
        await asyncio.sleep(BATCH / RATE)  # the producer's pace


async def _consume(consumer: Consumer, tally: Tally) -> None:
    async for d in consumer:
        tally.got(d.id, d.timestamp_ms, d.received_at_ms)
        try:
            await d.ack()
        except DejaqError:
            pass  # delivered again after its lease; counted once


async def _fault(name: str, cluster: Any) -> float:
    """Run fault ``name`` on ``cluster``; the seconds it took."""
    started = time.monotonic()
    victim = cluster.master_of(Slot(TOPIC, 0, CLUSTER_TOPIC_SLOTS).prefix)
    if name == "failover":
        victim.kill()
        await asyncio.to_thread(cluster.wait_healthy)
        victim.start()
        await asyncio.to_thread(cluster.wait_healthy)
    else:
        target = next(n for n in cluster.masters() if n.port != victim.port)
        await asyncio.to_thread(cluster.reshard, victim, target, RESHARD_SLOTS)
    return time.monotonic() - started


async def one(name: str, plan: Plan) -> dict[str, Any]:
    async with redis_cluster_store() as served:
        url = f"{served.url}?wait_replicas=1&wait_timeout_ms=1000"
        with tempfile.TemporaryDirectory(prefix="dejaq-bench-faults-") as workdir:
            async with (
                broker(url, cwd=workdir, env=plan.broker_env) as proc,
                Client(proc.address) as producing,
                Client(proc.address) as consuming,
            ):
                await Admin(producing).create_topic(TOPIC)
                tally = Tally()
                async with (
                    Producer(producing, TOPIC) as producer,
                    Consumer(consuming, TOPIC) as consumer,  # the default lease
                ):
                    reader = asyncio.create_task(_consume(consumer, tally))
                    try:
                        load = asyncio.create_task(_produce(producer, tally, plan.step_s))
                        await asyncio.sleep(min(FAULT_AT_S, plan.step_s / 2))
                        took = await _fault(name, served.cluster)
                        await load
                        tally.producing = False
                        deadline = time.monotonic() + DRAIN_S
                        while not set(tally.produced) <= tally.delivered:
                            if time.monotonic() > deadline:
                                break
                            await asyncio.sleep(0.05)  # polling the drain
                    finally:
                        reader.cancel()
                        await asyncio.gather(reader, return_exceptions=True)
    return {
        "rate": RATE,
        "seconds": plan.step_s,
        "fault_s": round(took, 2),
        "produced": len(tally.produced),
        "delivered": len(tally.delivered & set(tally.produced)),
        "lost": len(set(tally.produced) - tally.delivered),
        "early": tally.early,
        "longest_stall_s": round(max(tally.gaps, default=0.0), 2),
        "latest_s": round(tally.latest_s, 2),
        "delivered_again": tally.again,
    }


async def run(plan: Plan, faults: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in faults:
        print(f"[redis-cluster] {name} under a broker ...", flush=True)
        try:
            out[name] = await one(name, plan)
        except Unavailable:
            raise
        except Exception as exc:  # recorded; the other fault still runs
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"[redis-cluster] {name}: {out[name]}", flush=True)
    return out


def render(results: dict[str, Any]) -> str:
    rows = []
    for name, r in results.items():
        if not isinstance(r, dict) or "error" in r or "skipped" in r:
            rows.append(f"  {name}: {r.get('error') or r.get('skipped')}")
            continue
        rows.append(
            f"  {name:<9} {r['produced']:>6} produced  {r['delivered']:>6} delivered"
            f"  lost {r['lost']}  early {r['early']}  longest stall {r['longest_stall_s']} s"
            f"  latest {r['latest_s']} s  delivered again {r['delivered_again']}"
            f"  (the fault took {r['fault_s']} s)"
        )
    title = (
        f"\n== redis-cluster faults under a broker (wait_replicas=1, {RATE} msgs/s due"
        f" {DUE_AFTER_MS} ms after produce) =="
    )
    return "\n".join([title, *rows])


def problems(results: dict[str, Any] | None) -> list[str]:
    found = []
    for name, r in (results or {}).items():
        if "error" in r:
            found.append(f"{name}: {r['error']}")
        elif r.get("lost") or r.get("early"):
            found.append(f"{name}: {r['lost']} lost, {r['early']} early")
    return found
