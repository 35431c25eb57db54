"""Produce throughput, delivery lateness and burst drain, against a real broker process.

For each storage backend a fresh broker runs on a free loopback port, and each
phase uses a fresh topic:

- produce: N messages due a day ahead (nothing is delivered), sent in batches of
  B with several frames in flight; msgs/s from the first frame to the last answer.
- lateness: M messages due uniformly over S seconds from ~0.5 s after now,
  consumed and acked; lateness = received_at_ms - timestamp_ms per message.
  A negative lateness is an early delivery, which the service promises never to do.
- burst: K messages all due now; end-to-end msgs/s from the first produce to
  the last ack (the campaign herd).
- idle: the broker's CPU while a consumer waits and nothing is due for an hour
  (reminders: idle cost matters).

Every phase also records the CPU seconds spent by this process (the driver) and
by the broker, to show which side limits a figure.

    python benchmarks/throughput_latency.py [--storage memory|sqlite|all]
        [--messages N] [--spread-s S] [--batch B] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from common import BrokerFailed, BrokerProcess, broker, percentile, save

from dejaq.core.clock import now_ms
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer, Delivery
from dejaq.driver.producer import Outgoing, Producer

PAYLOAD = bytes(range(100))  # 100 bytes
DAY_MS = 24 * 3600 * 1000
LEAD_MS = 500  # the first lateness message is due this long after the produce starts
STORAGES = {"memory": "memory://", "sqlite": "sqlite:///bench.db"}
IDLE_WAITING = 1000  # messages waiting (an hour ahead) while the broker idles
IDLE_SETTLE_S = 0.2


@dataclass(frozen=True)
class Plan:
    messages: int  # produce phase
    batch: int  # messages per Produce frame
    in_flight: int  # Produce frames in flight
    lateness_messages: int
    spread_s: float
    burst: int
    credits: int  # consumer window
    idle_s: float  # idle phase: how long to watch the broker's CPU
    phase_timeout_s: float


Phase = Callable[[Client, Plan], Awaitable[dict[str, Any]]]


def ids(count: int) -> list[str]:
    """``count`` distinct 26-character ids."""
    prefix = uuid.uuid4().hex[:8]
    return [f"{prefix}-{i:017d}" for i in range(count)]


def chunks(items: Sequence[Outgoing], size: int) -> list[Sequence[Outgoing]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


async def fresh_topic(client: Client, phase: str) -> str:
    name = f"bench-{phase}-{uuid.uuid4().hex[:10]}"
    await Admin(client).create_topic(name)
    return name


async def produce_all(producer: Producer, messages: Sequence[Outgoing], plan: Plan) -> int:
    """Send ``messages`` in batches with ``plan.in_flight`` frames in flight; count accepted."""
    queue = chunks(messages, plan.batch)
    queue.reverse()
    accepted = 0

    async def worker() -> None:
        nonlocal accepted
        while queue:
            results = await producer.send_batch(queue.pop())
            accepted += sum(r.accepted for r in results)

    await asyncio.gather(*(worker() for _ in range(plan.in_flight)))
    return accepted


class Collector:
    """Takes deliveries, records lateness once per id, acks without blocking the loop."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.lateness: dict[str, int] = {}
        self.duplicates = 0
        self.acks: list[asyncio.Future[None]] = []
        self.last_ack_s = 0.0

    async def take(self, consumer: Consumer) -> None:
        async for d in consumer:
            self._record(d)
            if len(self.lateness) >= self.expected:
                return

    def _record(self, d: Delivery) -> None:
        if d.id in self.lateness:
            self.duplicates += 1
        else:
            self.lateness[d.id] = d.received_at_ms - d.timestamp_ms
        # Acks made in one loop turn travel in one Settle frame; awaiting each
        # one here would add a round trip per message to the consumer.
        ack = asyncio.ensure_future(d.ack())
        ack.add_done_callback(self._acked)
        self.acks.append(ack)

    def _acked(self, _: asyncio.Future[None]) -> None:
        self.last_ack_s = time.perf_counter()

    async def settle(self) -> int:
        """Wait for every ack; return how many failed."""
        outcomes = await asyncio.gather(*self.acks, return_exceptions=True)
        return sum(isinstance(o, BaseException) for o in outcomes)

    def stats(self) -> dict[str, Any]:
        values = list(self.lateness.values())
        return {
            "delivered": len(values),
            "duplicates": self.duplicates,
            "early": sum(v < 0 for v in values),
            "p50_ms": percentile(values, 50),
            "p99_ms": percentile(values, 99),
            "p999_ms": percentile(values, 99.9),
            "max_ms": max(values, default=0),
            "mean_ms": round(statistics.fmean(values), 2) if values else None,
        }


async def produce_phase(client: Client, plan: Plan) -> dict[str, Any]:
    topic = await fresh_topic(client, "produce")
    far = now_ms() + DAY_MS
    messages = [
        Outgoing(PAYLOAD, far + i % 60_000, id=i_d) for i, i_d in enumerate(ids(plan.messages))
    ]
    producer = Producer(client, topic, max_batch=plan.batch, max_in_flight=plan.in_flight)
    try:
        await producer.send_batch([Outgoing(PAYLOAD, far, id="warm-up")])  # opens the stream
        start = time.perf_counter()
        accepted = await produce_all(producer, messages, plan)
        seconds = time.perf_counter() - start
    finally:
        await producer.close()
    return {
        "messages": plan.messages,
        "accepted": accepted,
        "batch": plan.batch,
        "in_flight": plan.in_flight,
        "seconds": round(seconds, 3),
        "msgs_per_s": round(plan.messages / seconds),
    }


async def lateness_phase(client: Client, plan: Plan) -> dict[str, Any]:
    topic = await fresh_topic(client, "lateness")
    rng = random.Random(1)
    span_ms = max(1, round(plan.spread_s * 1000))
    collector = Collector(plan.lateness_messages)
    async with Consumer(client, topic, credits=plan.credits) as consumer:
        first_due = now_ms() + LEAD_MS
        messages = [
            Outgoing(PAYLOAD, first_due + rng.randrange(span_ms), id=i)
            for i in ids(plan.lateness_messages)
        ]
        producer = Producer(client, topic, max_batch=plan.batch, max_in_flight=plan.in_flight)
        taking = asyncio.create_task(collector.take(consumer))
        try:
            await produce_all(producer, messages, plan)
        finally:
            await producer.close()
        produced_in_time = now_ms() < first_due
        timed_out = False
        try:
            await asyncio.wait_for(taking, plan.spread_s + plan.phase_timeout_s)
        except TimeoutError:
            timed_out = True
        failed_acks = await collector.settle()
    return {
        "messages": plan.lateness_messages,
        "spread_s": plan.spread_s,
        **collector.stats(),
        "failed_acks": failed_acks,
        "timed_out": timed_out,
        "produced_before_first_due": produced_in_time,
    }


async def burst_phase(client: Client, plan: Plan) -> dict[str, Any]:
    topic = await fresh_topic(client, "burst")
    collector = Collector(plan.burst)
    async with Consumer(client, topic, credits=plan.credits) as consumer:
        producer = Producer(client, topic, max_batch=plan.batch, max_in_flight=plan.in_flight)
        await producer.send_batch([Outgoing(PAYLOAD, now_ms() + DAY_MS, id="warm-up")])
        names = ids(plan.burst)
        start = time.perf_counter()
        due = now_ms()
        messages = [Outgoing(PAYLOAD, due, id=i) for i in names]
        taking = asyncio.create_task(collector.take(consumer))
        try:
            await produce_all(producer, messages, plan)
        finally:
            await producer.close()
        produce_s = time.perf_counter() - start
        timed_out = False
        try:
            await asyncio.wait_for(taking, plan.phase_timeout_s)
        except TimeoutError:
            timed_out = True
        failed_acks = await collector.settle()
        end_to_end_s = max(collector.last_ack_s, start) - start
    stats = collector.stats()
    return {
        "messages": plan.burst,
        "delivered": stats["delivered"],
        "early": stats["early"],
        "failed_acks": failed_acks,
        "timed_out": timed_out,
        "produce_s": round(produce_s, 3),
        "end_to_end_s": round(end_to_end_s, 3),
        "end_to_end_msgs_per_s": round(stats["delivered"] / end_to_end_s) if end_to_end_s else 0,
        "lateness_p50_ms": stats["p50_ms"],
        "lateness_p99_ms": stats["p99_ms"],
        "lateness_max_ms": stats["max_ms"],
    }


async def idle_phase(client: Client, plan: Plan, proc: BrokerProcess) -> dict[str, Any]:
    topic = await fresh_topic(client, "idle")
    later = now_ms() + 3600 * 1000
    messages = [Outgoing(PAYLOAD, later + i, id=i_d) for i, i_d in enumerate(ids(IDLE_WAITING))]
    async with Producer(client, topic, max_batch=plan.batch) as producer:
        await produce_all(producer, messages, plan)
    async with Consumer(client, topic, credits=plan.credits):
        await asyncio.sleep(IDLE_SETTLE_S)  # let the consumer join and the dispatcher settle
        before = proc.cpu_seconds()
        # Waiting is the measurement here: nothing is due for an hour.
        await asyncio.sleep(plan.idle_s)
        after = proc.cpu_seconds()
    result: dict[str, Any] = {"waiting": IDLE_WAITING, "seconds": plan.idle_s}
    if before is not None and after is not None:
        result["broker_cpu_percent"] = round(100 * (after - before) / plan.idle_s, 2)
    return result


async def run_storage(name: str, plan: Plan) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"dejaq-bench-{name}-") as workdir:
        async with broker(STORAGES[name], cwd=workdir) as proc, Client(proc.address) as client:
            print(f"[{name}] broker on {proc.address}")
            phases: tuple[tuple[str, Phase], ...] = (
                ("produce", produce_phase),
                ("lateness", lateness_phase),
                ("burst", burst_phase),
                ("idle", functools.partial(idle_phase, proc=proc)),
            )
            for phase, run in phases:
                print(f"[{name}] {phase} ...", flush=True)
                client_cpu, broker_cpu = time.process_time(), proc.cpu_seconds()
                try:
                    async with asyncio.timeout(plan.phase_timeout_s + plan.spread_s + 30):
                        results[phase] = await run(client, plan)
                except TimeoutError:
                    results[phase] = {"error": "phase timed out"}
                # Where the time went: this process (the driver) vs the broker.
                results[phase]["client_cpu_s"] = round(time.process_time() - client_cpu, 2)
                after = proc.cpu_seconds()
                if after is not None and broker_cpu is not None:
                    results[phase]["broker_cpu_s"] = round(after - broker_cpu, 2)
                print(f"[{name}] {phase}: {results[phase]}", flush=True)
    return results


def problems(results: dict[str, Any]) -> list[str]:
    """What should fail the run: early deliveries, losses, timeouts."""
    found = []
    for storage, phases in results.items():
        if storage == "config":
            continue
        for phase, r in phases.items():
            if not isinstance(r, dict):
                continue
            if r.get("error") or r.get("timed_out") or r.get("failed_acks"):
                found.append(f"{storage}/{phase}: {r}")
            if r.get("early"):
                found.append(f"{storage}/{phase}: {r['early']} messages delivered EARLY")
            expected = r.get("messages")
            got = r.get("delivered", r.get("accepted"))
            if expected is not None and got is not None and got != expected:
                found.append(f"{storage}/{phase}: {got} of {expected} messages")
    return found


def parse(argv: Sequence[str] | None) -> tuple[list[str], Plan]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--storage", choices=[*STORAGES, "all"], default="all")
    p.add_argument("--messages", type=int, help="produce phase size (default 100000, quick 20000)")
    p.add_argument("--batch", type=int, default=500, help="messages per frame (default 500)")
    p.add_argument("--in-flight", type=int, default=8, help="frames in flight (default 8)")
    p.add_argument("--spread-s", type=float, help="lateness: due times spread (default 3, quick 1)")
    p.add_argument("--lateness-messages", type=int, help="lateness phase size (default 2000)")
    p.add_argument("--burst", type=int, help="burst phase size (default 20000, quick 5000)")
    p.add_argument("--credits", type=int, default=2000, help="consumer window (default 2000)")
    p.add_argument("--timeout-s", type=float, default=30.0, help="per phase (default 30)")
    p.add_argument("--quick", action="store_true", help="smaller sizes: a run under 30 s")
    a = p.parse_args(argv)
    plan = Plan(
        messages=a.messages or (20_000 if a.quick else 100_000),
        batch=a.batch,
        in_flight=a.in_flight,
        lateness_messages=a.lateness_messages or (1_000 if a.quick else 2_000),
        spread_s=a.spread_s if a.spread_s is not None else (1.0 if a.quick else 3.0),
        burst=a.burst or (5_000 if a.quick else 20_000),
        credits=a.credits,
        idle_s=1.0 if a.quick else 2.0,
        phase_timeout_s=a.timeout_s,
    )
    storages = list(STORAGES) if a.storage == "all" else [a.storage]
    return storages, plan


async def main(argv: Sequence[str] | None = None) -> int:
    storages, plan = parse(argv)
    results: dict[str, Any] = {"config": asdict(plan)}
    for name in storages:
        try:
            results[name] = await run_storage(name, plan)
        except BrokerFailed as exc:
            print(f"[{name}] skipped: {exc}")
            results[name] = {"skipped": str(exc)}
    save("throughput_latency", results)
    found = problems(results)
    for line in found:
        print(f"PROBLEM {line}")
    skipped = [n for n in storages if "skipped" in results[n]]
    return 1 if found or len(skipped) == len(storages) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
