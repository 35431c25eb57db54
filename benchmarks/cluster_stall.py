"""How long one hung Redis Cluster master holds up the other masters' deliveries.

    python benchmarks/cluster_stall.py                 # SIGSTOP a master for 8 s
    python benchmarks/cluster_stall.py --stop-s 4 --rate 200

A fresh Redis Cluster (3 masters, 3 replicas: ``tests/redis_cluster.py``),
the ``redis+cluster://`` storage and one broker ``Dispatcher`` in this process
(no gRPC: what is measured is the storage's lease passes as the dispatcher
runs them), a consumer with ample credit that records when each message
arrives. Messages due at ``--rate`` a second over the whole run are stored
first; once the run is under way one master (not the registry's) gets SIGSTOP
for ``--stop-s`` seconds, long enough for its replica to take over (node
timeout 2 s), then SIGCONT. Figures: the longest gap between two deliveries of
the healthy masters' slots from the stop until the run's end (and the stopped
master's own, for comparison), how many of the healthy slots' messages due
during the stop arrived before it ended, and their worst lateness. The run is
bounded (``--stop-s`` plus about 8 s, and the cluster's start).

Figures print and go to benchmarks/results/cluster_stall.json (``--name``).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import time
from typing import Any

from suite.backends import redis_cluster_store
from suite.procstat import load_average
from suite.record import save_record

from dejaq.broker.dispatch.dispatcher import Dispatcher
from dejaq.core.buckets import bucket_of
from dejaq.core.model import Leases, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.redis import keys

TOPIC = "stall"
BUCKETS = 64
LEAD_S, TAIL_S = 2.0, 4.0  # deliveries before the stop, and after it ends
INSERT_BATCH = 500


class Recorder:
    """A consumer with ample credit: when each message arrived (monotonic s)."""

    consumer_id = "bench"
    lease_ms = 60_000
    ahead_ms = 0
    lease_ahead_ms = 0
    answers_once = False

    def __init__(self) -> None:
        self.credit = 1 << 20
        self.arrived: dict[str, float] = {}

    def deliver(self, leases: Leases) -> None:
        now = time.monotonic()
        for m in leases.delivered:
            self.arrived.setdefault(m.id, now)
        self.credit = 1 << 20

    def fail(self, exc: Exception) -> None:
        raise exc


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch within [start, end] with no arrival."""
    inside = sorted(t for t in times if start <= t <= end)
    edges = [start, *inside, end]
    return max(b - a for a, b in itertools.pairwise(edges))


async def measure(stop_s: float, rate: int) -> dict[str, Any]:
    async with redis_cluster_store() as store:
        cluster = store.cluster
        storage = storage_from_url(store.url)
        await storage.open()
        try:
            await storage.create_topic(Topic(TOPIC, TopicSettings(buckets=BUCKETS)))
            slots = storage.options.topic_slots  # type: ignore[attr-defined]
            registry = cluster.master_of(keys.TOPICS).port
            owner = {
                s: cluster.master_of(keys.Slot(TOPIC, s, slots).prefix).port for s in range(slots)
            }
            victim = next(cluster.node(p) for p in owner.values() if p != registry)
            run_s = LEAD_S + stop_s + TAIL_S
            count = int(rate * run_s)
            t0_ms = int(time.time() * 1000) + 1000  # due from a second after the inserts
            messages = [
                NewMessage(
                    f"m{i:06d}", t0_ms + i * 1000 // rate, b"x", bucket_of(f"m{i:06d}", BUCKETS)
                )
                for i in range(count)
            ]
            for i in range(0, count, INSERT_BATCH):
                await storage.insert(TOPIC, messages[i : i + INSERT_BATCH])
            on_victim = {
                m.id for m in messages if owner[m.bucket * slots // BUCKETS] == victim.port
            }
            due_at = {m.id: m.timestamp / 1000 for m in messages}
            topic = await storage.get_topic(TOPIC)
            assert topic is not None
            recorder = Recorder()
            dispatcher = Dispatcher(topic, storage, lambda: None, 1000, 1000, lookahead_ms=20)
            dispatcher.add(recorder)
            dispatcher.start()
            try:
                wall_to_mono = time.monotonic() - time.time()
                await asyncio.sleep(max(0.0, t0_ms / 1000 - time.time()) + LEAD_S)
                stopped = time.monotonic()
                victim.pause()
                try:
                    await asyncio.sleep(stop_s)
                finally:
                    victim.resume()
                resumed = time.monotonic()
                await asyncio.sleep(TAIL_S)
            finally:
                await dispatcher.stop()
            await asyncio.to_thread(cluster.wait_healthy)
        finally:
            await storage.close()
    arrived = recorder.arrived
    healthy = [t for id, t in arrived.items() if id not in on_victim]
    hung = [t for id, t in arrived.items() if id in on_victim]
    window_end = resumed + TAIL_S  # the run's end
    due_in_stop = [
        id
        for id in due_at
        if id not in on_victim and stopped <= due_at[id] + wall_to_mono <= resumed - 0.5
    ]
    in_time = [id for id in due_in_stop if id in arrived and arrived[id] <= resumed]
    lateness = [arrived[id] - (due_at[id] + wall_to_mono) for id in due_in_stop if id in arrived]
    return {
        "messages": count,
        "delivered": len(arrived),
        "healthy_longest_gap_ms": round(longest_gap(healthy, stopped, window_end) * 1000),
        "stopped_master_longest_gap_ms": round(longest_gap(hung, stopped, window_end) * 1000),
        "healthy_due_during_stop": len(due_in_stop),
        "healthy_delivered_before_resume": len(in_time),
        "healthy_worst_lateness_ms": round(max(lateness, default=0.0) * 1000),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-s", type=float, default=8.0)
    parser.add_argument("--rate", type=int, default=300)
    parser.add_argument("--name", default="cluster_stall")
    args = parser.parse_args()
    load_before = load_average()
    figures = asyncio.run(measure(args.stop_s, args.rate))
    print(
        f"one master stopped {args.stop_s:g} s: healthy slots' longest gap"
        f" {figures['healthy_longest_gap_ms']} ms (the stopped master's"
        f" {figures['stopped_master_longest_gap_ms']} ms); healthy messages due during"
        f" the stop delivered before it ended: {figures['healthy_delivered_before_resume']}"
        f" of {figures['healthy_due_during_stop']}, worst lateness"
        f" {figures['healthy_worst_lateness_ms']} ms; load average {load_before}"
        f" -> {load_average()}"
    )
    save_record(
        args.name,
        {"stop_s": args.stop_s, "rate": args.rate, "buckets": BUCKETS},
        figures,
        load_before,
    )


if __name__ == "__main__":
    main()
