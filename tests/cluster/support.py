"""What the cluster stories share: brokers in a cluster, status polling, a recorder.

``Recorder`` runs consumers that ack everything and records every delivery, so
a test can check the promises afterwards: all delivered, none early, and one
holder at a time (``holder_overlaps``).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import statistics
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from dejaq.core.errors import DejaqError
from dejaq.driver.client import Client
from dejaq.driver.cluster import ClusterStatus, cluster_status
from dejaq.driver.consumer import Consumer, Delivery
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import now_ms, wait_until

TTL_S = 3  # etcd lease of the test brokers: a killed broker leaves after this
# The clock skew past which a broker stops its dispatch: a heartbeat delayed by
# a loaded machine (CI runs these stories beside other tests) reads as skew, so
# these brokers tolerate more than the default 100 ms; the stories of the
# guard itself (test_one_clock.py) set the default back.
SKEW_MAX_MS = 400


@dataclass
class Cluster:
    """Brokers of one cluster (name) on one SQLite file, coordinated by etcd."""

    name: str
    etcd_url: str
    folder: Path
    brokers: list[BrokerProcess] = field(default_factory=list)
    storage_url: str = ""  # the brokers' storage; empty: one SQLite file

    @property
    def storage(self) -> str:
        return self.storage_url or f"sqlite:///{self.folder / 'cluster.db'}"

    def start(self, n: int, **env: str) -> list[BrokerProcess]:
        """Start ``n`` brokers side by side; each has joined the cluster when this returns."""
        base = {
            "DEJAQ_ETCD": self.etcd_url,
            "DEJAQ_CLUSTER": self.name,
            "DEJAQ_ETCD_TTL_S": str(TTL_S),
            "DEJAQ_SKEW_MAX_MS": str(SKEW_MAX_MS),
        }
        new = [
            BrokerProcess(
                self.storage,
                self.folder / f"broker-{len(self.brokers) + i}.log",
                {**base, **env},
            )
            for i in range(n)
        ]
        self.brokers += new  # before starting: stop_all cleans up after a failed start
        with ThreadPoolExecutor(n) as pool:
            list(pool.map(BrokerProcess.start, new))
        return new

    def stop_all(self) -> dict[str, int | None]:
        return {b.address: b.stop() for b in self.brokers}


async def status(address: str) -> ClusterStatus:
    async with Client(address, timeout_s=5) as client:
        return await cluster_status(client)


def covers(s: ClusterStatus, topic: str, consumers: int) -> bool:
    """The topic has ``consumers`` consumers whose buckets cover it exactly once."""
    t = next((t for t in s.topics if t.name == topic), None)
    if t is None or len(t.consumers) != consumers:
        return False
    owned = [b for c in t.consumers for first, last in c.buckets for b in range(first, last + 1)]
    return sorted(owned) == list(range(t.buckets))


async def wait_converged(
    addresses: Sequence[str],
    topic: str,
    consumers: int,
    brokers: Sequence[str] | None = None,
    timeout_s: float = 10.0,
) -> None:
    """Every broker in ``addresses`` reaches etcd, sees exactly ``brokers`` (default:
    ``addresses``) and ``consumers`` consumers covering the topic."""
    expected = set(brokers if brokers is not None else addresses)

    async def converged() -> bool:
        for address in addresses:
            s = await status(address)
            if not s.healthy or {b.address for b in s.brokers} != expected:
                return False
            if not covers(s, topic, consumers):
                return False
        return True

    await wait_until(converged, timeout_s, f"{len(addresses)} brokers to agree on {topic}")


@dataclass
class Seen:
    """One delivery as a consumer saw it."""

    consumer: str
    id: str
    due_ms: int
    received_ms: int
    deliveries: int
    lease_until_ms: int
    acked: bool = False

    @property
    def lateness_ms(self) -> int:
        return self.received_ms - self.due_ms


class Recorder:
    """Consumers that ack every delivery; every delivery recorded."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.ack_failures: list[tuple[str, str, DejaqError]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._acks: set[asyncio.Task[None]] = set()
        self.consumers: list[Consumer] = []

    async def add(
        self, name: str, brokers: Sequence[str], topic: str, lease_ms: int = 0, credits: int = 100
    ) -> None:
        """Start consumer ``name`` on the first of ``brokers`` (the rest for failover)."""
        client = Client(list(brokers))
        consumer = Consumer(client, topic, consumer_id=name, lease_ms=lease_ms, credits=credits)
        await consumer.start()
        self.consumers.append(consumer)
        self._tasks.append(asyncio.create_task(self._pump(name, consumer)))

    async def _pump(self, name: str, consumer: Consumer) -> None:
        async for d in consumer:
            seen = Seen(
                name, d.id, d.timestamp_ms, d.received_at_ms, d.deliveries, d.lease_until_ms
            )
            self.seen.append(seen)
            task = asyncio.create_task(self._ack(seen, d))
            self._acks.add(task)
            task.add_done_callback(self._acks.discard)

    async def _ack(self, seen: Seen, delivery: Delivery) -> None:
        try:
            await delivery.ack(confirm=True)
            seen.acked = True
        except DejaqError as exc:
            self.ack_failures.append((seen.consumer, seen.id, exc))

    def ids(self) -> set[str]:
        return {s.id for s in self.seen}

    def by_id(self) -> dict[str, list[Seen]]:
        out: dict[str, list[Seen]] = {}
        for s in sorted(self.seen, key=lambda s: s.received_ms):
            out.setdefault(s.id, []).append(s)
        return out

    async def wait_for(self, ids: Iterable[str], timeout_s: float) -> None:
        wanted = set(ids)
        await wait_until(
            lambda: wanted <= self.ids(), timeout_s, f"{len(wanted)} messages delivered"
        )
        if self._acks:
            await asyncio.wait(set(self._acks), timeout=10)

    async def close(self) -> None:
        for consumer in self.consumers:
            with contextlib.suppress(DejaqError):
                await consumer.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for consumer in self.consumers:
            await consumer.client.close()


def holder_overlaps(seen: Iterable[Seen]) -> list[str]:
    """Messages that two deliveries held at once: redelivered while an earlier lease
    was live, or delivered again after a successful ack."""
    bad: list[str] = []
    by_id: dict[str, list[Seen]] = {}
    for s in sorted(seen, key=lambda s: s.received_ms):
        by_id.setdefault(s.id, []).append(s)
    for mid, ds in by_id.items():
        for earlier, later in itertools.pairwise(ds):
            if earlier.acked or later.received_ms < earlier.lease_until_ms:
                bad.append(mid)
    return bad


def figures(latenesses: Sequence[int]) -> str:
    """p50 / p99 / max of a list of ms values."""
    ordered = sorted(latenesses)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    p50 = statistics.median(ordered)
    return f"n={len(ordered)} p50={p50:.0f} ms p99={p99} ms max={ordered[-1]} ms"


__all__ = ["Cluster", "Recorder", "Seen", "figures", "holder_overlaps", "now_ms", "status"]
