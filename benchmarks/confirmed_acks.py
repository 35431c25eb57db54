"""Confirmed acks on a Redis Cluster with ``wait_replicas=1``: their round trip by rate.

    python benchmarks/confirmed_acks.py                    # 50, 400, 1000 msgs/s, 8 s each
    python benchmarks/confirmed_acks.py --rates 400 --seconds 15

A fresh Redis Cluster (3 masters, 3 replicas: ``tests/redis_cluster.py``) and
a ``dejaq broker`` process on it with ``?wait_replicas=1``. For each rate, a
topic of its own: this process produces messages due now at that rate (a
batch every 20 ms) and one consumer in this process works on each delivery in
a task of its own (0-5 ms) and acks it with ``ack(confirm=True)``, so each ack
leaves in a turn of its own, a Settle frame of its own. Figures a rate: the
ack round trip (p50, p99, max: from the call to the broker's answer), how
many deliveries were redeliveries (a lease run out before its ack landed),
and the masters' WAIT commands a delivered message (``INFO commandstats``).
The run is bounded: ``--seconds`` a rate, then up to
``DRAIN_S`` for the last acks.

Figures print and go to benchmarks/results/confirmed_acks.json (``--name``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import time
from typing import Any

from suite.backends import redis_cluster_store
from suite.broker import broker
from suite.procstat import load_average
from suite.record import save_record

from dejaq.driver import Admin, Client, Consumer, Delivery, Producer
from dejaq.driver.producer import Outgoing

TICK_S = 0.02
DRAIN_S = 30.0
LEASE_MS = 5_000
# Each delivery is worked on for up to this long (uniform) before its ack, as
# a consumer does: acks then leave in turns of their own, a frame each.
WORK_S = 0.005


def now_ms() -> int:
    return int(time.time() * 1000)


def wait_calls(cluster: Any) -> int:
    total = 0
    for node in cluster.masters():
        with node.client() as client:
            stats = client.info("commandstats")
        total += int(stats.get("cmdstat_wait", {}).get("calls", 0))
    return total


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] if ordered else 0.0


async def one_rate(address: str, cluster: Any, rate: int, seconds: float) -> dict[str, Any]:
    topic = f"acks-{rate}"
    round_trips: list[float] = []
    acked: set[str] = set()
    redelivered = 0
    pending: set[asyncio.Task[None]] = set()
    count = int(rate * seconds)
    all_acked = asyncio.Event()

    async def ack(d: Delivery) -> None:
        await asyncio.sleep(random.uniform(0, WORK_S))  # the consumer's work on it
        started = time.monotonic()
        try:
            await d.ack(confirm=True)
        except Exception:  # a refusal (lease lost meanwhile): it comes again
            return
        round_trips.append((time.monotonic() - started) * 1000)
        acked.add(d.id)
        if len(acked) >= count:
            all_acked.set()

    async with Client(address) as producing, Client(address) as consuming:
        await Admin(producing).create_topic(topic)
        before = wait_calls(cluster)
        async with (
            Producer(producing, topic) as producer,
            Consumer(consuming, topic, lease_ms=LEASE_MS) as consumer,
        ):

            async def consume() -> None:
                nonlocal redelivered
                async for d in consumer:
                    if d.deliveries > 1:
                        redelivered += 1
                    task = asyncio.create_task(ack(d))
                    pending.add(task)
                    task.add_done_callback(pending.discard)

            reader = asyncio.create_task(consume())
            sent, started = 0, time.monotonic()
            while sent < count:
                target = min(count, int((time.monotonic() - started) * rate) + 1)
                if target > sent:
                    due = now_ms()
                    batch = [Outgoing(b"x", due, id=f"m{i:07d}") for i in range(sent, target)]
                    await producer.send_batch(batch)
                    sent = target
                await asyncio.sleep(TICK_S)  # the producer's pace
            with contextlib.suppress(TimeoutError):  # the last acks, bounded
                await asyncio.wait_for(all_acked.wait(), DRAIN_S)
            reader.cancel()
            await asyncio.gather(reader, *pending, return_exceptions=True)
        waits = wait_calls(cluster) - before
    return {
        "rate": rate,
        "messages": count,
        "acked": len(acked),
        "redelivered": redelivered,
        "ack_round_trip_ms_p50": round(percentile(round_trips, 0.5), 1),
        "ack_round_trip_ms_p99": round(percentile(round_trips, 0.99), 1),
        "ack_round_trip_ms_max": round(max(round_trips, default=0.0), 1),
        "wait_calls_per_message": round(waits / count, 2),
    }


async def measure(rates: list[int], seconds: float) -> list[dict[str, Any]]:
    out = []
    async with redis_cluster_store() as store:
        url = f"{store.url}?wait_replicas=1&wait_timeout_ms=1000"
        async with broker(url, http_api=False) as running:
            for rate in rates:
                figures = await one_rate(running.address, store.cluster, rate, seconds)
                print(
                    f"{rate}/s: ack(confirm=True) round trip p50"
                    f" {figures['ack_round_trip_ms_p50']} ms, p99"
                    f" {figures['ack_round_trip_ms_p99']} ms, max"
                    f" {figures['ack_round_trip_ms_max']} ms; redelivered"
                    f" {figures['redelivered']} of {figures['messages']}; acked"
                    f" {figures['acked']}; WAITs a message {figures['wait_calls_per_message']}"
                )
                out.append(figures)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="50,400,1000")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--name", default="confirmed_acks")
    args = parser.parse_args()
    rates = [int(r) for r in args.rates.split(",")]
    load_before = load_average()
    results = asyncio.run(measure(rates, args.seconds))
    print(f"load average {load_before} -> {load_average()}")
    save_record(
        args.name,
        {"rates": rates, "seconds": args.seconds, "lease_ms": LEASE_MS},
        results,
        load_before,
    )


if __name__ == "__main__":
    main()
