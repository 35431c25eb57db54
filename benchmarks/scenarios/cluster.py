"""A cluster of 3 brokers on one SQLite file, coordinated by a real etcd.

The timing facts the cluster tests no longer assert, measured through the
driver (``Client``, ``Producer``, ``Consumer``, ``Admin``):

- cross-broker lateness: a consumer attached to broker B only, messages
  produced through broker A due shortly after (``lead_ms``), in 100 ms
  frames: p50 / p99 / max of receive - due (this process's clock), early
  (received in a millisecond before the due one: must be 0), lost (never
  delivered: must be 0);
- rebalance after ``kill -9``: consumers on broker 0 and on broker 2, a
  producer on broker 1 sending messages due now; broker 2 is killed. The
  figure: time from the kill until the consumer on broker 0 receives a
  message of a bucket the dead consumer owned (the etcd lease is
  ``DEJAQ_ETCD_TTL_S`` = 3 s, as in the tests), and until broker 0's
  ``ClusterStatus`` shows one consumer covering the topic. Early and lost as
  above (what the dead consumer held comes back when its 2 s lease expires).

etcd is started with ``tests/etcd_server.py`` (the tests' helper); the brokers
with ``dejaq broker --etcd URL --cluster NAME``, as an operator starts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import grpc
import numpy as np
from grpc_health.v1 import health_pb2, health_pb2_grpc
from suite.backends import ROOT, Unavailable
from suite.broker import LISTENING, START_TIMEOUT_S, BrokerFailed, dejaq_command, stop
from suite.messages import PAYLOAD
from suite.plan import Plan
from suite.stats import lateness_summary

from dejaq.core.buckets import bucket_of
from dejaq.core.errors import DejaqError
from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.cluster import cluster_status
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing, Producer

TTL_S = 3  # DEJAQ_ETCD_TTL_S of the brokers: a killed broker leaves after this
BROKERS = 3
TICK_S = 0.1  # the producer sends one frame per tick
LEASE_MS = 2000  # rebalance consumers: what the dead one held comes back soon
BUCKETS = 12
REBALANCE_RATE = 400  # msgs/s due now, produced through a surviving broker
CONVERGE_S = 20.0
DRAIN_S = 15.0
SERVICE = "dejaq.v1.Timeline"  # the service name the brokers' health reports


@dataclass(frozen=True)
class Sizes:
    messages: int  # cross-broker lateness: messages ...
    spread_s: float  # ... due evenly over this long
    lead_ms: int  # ... each sent this far ahead of due


SMOKE_SIZES = Sizes(messages=200, spread_s=1.0, lead_ms=500)
FULL_SIZES = Sizes(messages=3000, spread_s=10.0, lead_ms=500)


def sizes(plan: Plan) -> Sizes:
    return SMOKE_SIZES if plan.smoke else FULL_SIZES


def bound_s(plan: Plan) -> float:
    s = sizes(plan)
    return 60 + s.spread_s + 2 * DRAIN_S + 3 * CONVERGE_S + TTL_S


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def wait_until(
    check: Callable[[], Awaitable[bool]], timeout_s: float, what: str, every_s: float = 0.05
) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout_s:g} s")
        await asyncio.sleep(every_s)


@contextlib.asynccontextmanager
async def etcd() -> AsyncIterator[str]:
    """A fresh single-member etcd on free loopback ports (the tests' helper)."""
    binary = shutil.which("etcd")
    if binary is None:
        raise Unavailable("etcd is not installed (not on PATH)")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    try:
        from tests.etcd_server import EtcdServer  # type: ignore[import-not-found]
    except ImportError as exc:
        raise Unavailable(f"cannot import the etcd helpers: {exc}") from exc
    server = EtcdServer(binary, Path(tempfile.mkdtemp(prefix="dejaq-bench-etcd-")))
    try:
        await asyncio.to_thread(server.start)
    except RuntimeError as exc:
        await asyncio.to_thread(server.destroy)
        raise Unavailable(str(exc).splitlines()[0]) from exc
    try:
        yield server.url
    finally:
        await asyncio.to_thread(server.destroy)


@dataclass
class Member:
    """One ``dejaq broker`` of the cluster."""

    proc: asyncio.subprocess.Process
    address: str


async def start_broker(storage: str, etcd_url: str, name: str, log: Path, plan: Plan) -> Member:
    env = {"DEJAQ_ETCD_TTL_S": str(TTL_S), **plan.broker_env}
    return await launch_member(storage, etcd_url, name, log, env)


async def launch_member(
    storage: str,
    etcd_url: str,
    cluster: str,
    log: Path,
    env: dict[str, str],
    extra: Sequence[str] = (),
    start_s: float = START_TIMEOUT_S,
) -> Member:
    """A ``dejaq broker`` of ``cluster`` (``env`` over this process's, ``extra``
    arguments after the usual ones), once it says it listens."""
    full_env = {**os.environ, **env}
    full_env.pop("DEJAQ_BROKER", None)
    with log.open("ab") as errors:
        proc = await asyncio.create_subprocess_exec(
            *dejaq_command(),
            "broker",
            *("--listen", "127.0.0.1:0", "--storage", storage),
            *("--etcd", etcd_url, "--cluster", cluster, "--log-level", "WARNING"),
            *extra,
            stdout=asyncio.subprocess.PIPE,
            stderr=errors,
            env=full_env,
        )
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(start_s):
            while line := (await proc.stdout.readline()).decode():
                if line.startswith(LISTENING):
                    return Member(proc, line.removeprefix(LISTENING).split()[0])
    except TimeoutError:
        pass
    await stop(proc, 2)
    text = await asyncio.to_thread(log.read_text, errors="replace")
    tail = text.strip().splitlines()[-3:]
    raise BrokerFailed(f"cluster broker did not start: {' | '.join(tail)}")


@dataclass
class Seen:
    """What one consumer received: id -> (due ms, received ns)."""

    got: dict[str, tuple[int, int]] = field(default_factory=dict)
    early: int = 0
    acked: set[str] = field(default_factory=set)


async def pump(consumer: Consumer, seen: Seen, confirm: bool = False) -> None:
    async for d in consumer:
        received = time.time_ns()
        if received // 1_000_000 < d.timestamp_ms:
            seen.early += 1
        seen.got.setdefault(d.id, (d.timestamp_ms, received))
        try:
            await d.ack(confirm=confirm)
            seen.acked.add(d.id)
        except DejaqError:
            pass


async def covered(address: str, topic: str, consumers: int, brokers: set[str]) -> bool:
    async with Client(address, timeout_s=5) as client:
        s = await cluster_status(client)
    t = next((t for t in s.topics if t.name == topic), None)
    if not s.healthy or {b.address for b in s.brokers} != brokers or t is None:
        return False
    if len(t.consumers) != consumers:
        return False
    owned = sorted(b for c in t.consumers for lo, hi in c.buckets for b in range(lo, hi + 1))
    return owned == list(range(t.buckets))


async def serving(address: str) -> bool:
    """gRPC health, as a readiness probe asks it: a broker that just joined says
    NOT_SERVING until its clock guard has heard the others' clocks, and
    dispatches nothing meanwhile."""
    async with grpc.aio.insecure_channel(address) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=5)
    return bool(reply.status == health_pb2.HealthCheckResponse.SERVING)


async def cross_broker(members: list[Member], plan: Plan) -> dict[str, Any]:
    """Consumer on broker B, producer on broker A, due ``lead_ms`` after sending,
    once every broker serves (what a just-started broker withholds is not lateness
    between brokers)."""
    s = sizes(plan)
    a, b = members[0].address, members[1].address
    for address in (m.address for m in members):
        await wait_until(partial(serving, address), CONVERGE_S, f"{address} serving")
    topic = "cluster-lateness"
    async with Client(a) as ca:
        await Admin(ca).create_topic(topic)
    seen = Seen()
    async with Client(b) as cb, Consumer(cb, topic, consumer_id="on-b") as consumer:
        task = asyncio.create_task(pump(consumer, seen))
        try:
            everyone = {m.address for m in members}
            await wait_until(lambda: covered(a, topic, 1, everyone), CONVERGE_S, "consumer seen")
            sent: set[str] = set()
            ticks = max(1, round(s.spread_s / TICK_S))
            per_tick = [s.messages // ticks + (i < s.messages % ticks) for i in range(ticks)]
            async with Client(a) as ca, Producer(ca, topic) as producer:
                start = time.monotonic()
                for i, n in enumerate(per_tick):
                    base = now_ms() + s.lead_ms
                    step = TICK_S * 1000 / max(n, 1)
                    batch = [
                        Outgoing(PAYLOAD, base + int(j * step), id=f"x{i}-{j}") for j in range(n)
                    ]
                    await producer.send_batch(batch)
                    sent.update(m.id for m in batch)
                    await asyncio.sleep(max(0.0, start + (i + 1) * TICK_S - time.monotonic()))
            with contextlib.suppress(TimeoutError):
                await wait_until(
                    lambda: asyncio.sleep(0, sent <= seen.got.keys()), DRAIN_S, "delivered"
                )
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    late = np.array(
        [r / 1e6 - due for mid, (due, r) in seen.got.items() if mid in sent], dtype=np.float64
    )
    return {
        "messages": len(sent),
        "spread_s": s.spread_s,
        "lead_ms": s.lead_ms,
        "early": seen.early,
        "lost": len(sent - seen.got.keys()),
        "lateness": lateness_summary(late, seen.early),
    }


async def rebalance(members: list[Member], plan: Plan) -> dict[str, Any]:
    """kill -9 of broker 2 (with a consumer); how soon broker 0's consumer takes its buckets."""
    a0, a1, a2 = (m.address for m in members)
    topic = "cluster-rebalance"
    async with Client(a0) as c:
        await Admin(c).create_topic(topic, TopicSettings(buckets=BUCKETS))
    survivor, doomed = Seen(), Seen()
    c0 = Client(a0)
    c2 = Client(a2)
    consumer0 = Consumer(c0, topic, consumer_id="on-0", lease_ms=LEASE_MS)
    consumer2 = Consumer(c2, topic, consumer_id="on-2", lease_ms=LEASE_MS)
    tasks: list[asyncio.Task[None]] = []
    sent: set[str] = set()
    try:
        await consumer0.start()
        await consumer2.start()
        tasks = [
            asyncio.create_task(pump(consumer0, survivor)),
            asyncio.create_task(pump(consumer2, doomed, confirm=True)),
        ]
        everyone = {a0, a1, a2}
        await wait_until(lambda: covered(a0, topic, 2, everyone), CONVERGE_S, "two consumers")
        async with Client(a0) as c:
            (before,) = [t for t in (await cluster_status(c)).topics if t.name == topic]
        victim = {
            b
            for owner in before.consumers
            if owner.broker == a2
            for lo, hi in owner.buckets
            for b in range(lo, hi + 1)
        }
        per_tick = max(1, round(REBALANCE_RATE * TICK_S))
        killed_ns = 0
        first_ns: int | None = None
        status_s: float | None = None

        async def watch_status() -> None:
            nonlocal status_s
            await wait_until(lambda: covered(a0, topic, 1, {a0, a1}), 30, "status", 0.1)
            status_s = (time.time_ns() - killed_ns) / 1e9

        async with Client(a1) as cp, Producer(cp, topic) as producer:
            start = time.monotonic()
            i = 0
            watcher: asyncio.Task[None] | None = None
            deadline = start + 1.0 + TTL_S + 20
            while time.monotonic() < deadline:
                batch = [Outgoing(PAYLOAD, now_ms(), id=f"r{i}-{j}") for j in range(per_tick)]
                await producer.send_batch(batch)
                sent.update(m.id for m in batch)
                i += 1
                if killed_ns == 0 and time.monotonic() - start >= 1.0:
                    killed_ns = time.time_ns()
                    members[2].proc.send_signal(signal.SIGKILL)
                    watcher = asyncio.create_task(watch_status())
                if killed_ns and first_ns is None:
                    after = [
                        r
                        for mid, (_, r) in survivor.got.items()
                        if r > killed_ns and bucket_of(mid, BUCKETS) in victim
                    ]
                    first_ns = min(after) if after else None
                if first_ns is not None and watcher is not None and watcher.done():
                    break
                await asyncio.sleep(max(0.0, start + i * TICK_S - time.monotonic()))
        if watcher is not None and not watcher.done():
            watcher.cancel()
        await asyncio.gather(*(w for w in [watcher] if w), return_exceptions=True)
        tasks[1].cancel()  # the consumer of the dead broker: nothing more to see

        def delivered() -> set[str]:
            return survivor.got.keys() | doomed.acked

        with contextlib.suppress(TimeoutError):
            await wait_until(
                lambda: asyncio.sleep(0, sent <= delivered()),
                DRAIN_S + LEASE_MS / 1000,
                "all delivered",
            )
        lost = len(sent - delivered())
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(DejaqError, TimeoutError):
            async with asyncio.timeout(5):
                await consumer0.close()
        for client in (c0, c2):
            with contextlib.suppress(DejaqError, TimeoutError):
                async with asyncio.timeout(5):
                    await client.close()
    return {
        "etcd_ttl_s": TTL_S,
        "buckets": BUCKETS,
        "victim_buckets": len(victim),
        "produced_per_s": REBALANCE_RATE,
        "first_delivery_s": None if first_ns is None else round((first_ns - killed_ns) / 1e9, 3),
        "status_s": None if status_s is None else round(status_s, 3),
        "messages": len(sent),
        "early": survivor.early + doomed.early,
        "lost": lost,
    }


async def run(plan: Plan) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="dejaq-bench-cluster-") as workdir:
        folder = Path(workdir)
        storage = f"sqlite:///{folder / 'cluster.db'}"
        async with etcd() as url:
            started = await asyncio.gather(
                *(
                    start_broker(storage, url, "bench", folder / f"broker-{n}.log", plan)
                    for n in range(BROKERS)
                ),
                return_exceptions=True,
            )
            members = [m for m in started if isinstance(m, Member)]
            try:
                for failed in started:
                    if isinstance(failed, BaseException):
                        raise failed
                print(
                    f"[cluster] etcd {url}, brokers {', '.join(m.address for m in members)},"
                    f" storage {storage}",
                    flush=True,
                )
                out: dict[str, Any] = {"brokers": BROKERS, "storage": "sqlite"}
                out["cross_broker"] = await cross_broker(members, plan)
                out["rebalance"] = await rebalance(members, plan)
                return out
            finally:
                await asyncio.gather(*(stop(m.proc, 5) for m in members), return_exceptions=True)
