"""A steady load on a storage, as brokers put it there, for the cluster's failover
and resharding stories: one producer of due messages and two consumers that
lease and ack, each call retried after ``StorageUnavailable`` as a broker
retries. The ``Ledger`` keeps what the storage acknowledged, every lease given,
and the longest call (a stall, retries included)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from dejaq.core.buckets import bucket_of
from dejaq.core.errors import NotFound, StorageUnavailable
from dejaq.core.model import InsertStatus, NewMessage, Settled, Topic, TopicSettings
from dejaq.storage_plugins import Storage, storage_from_url
from dejaq.storage_plugins.base import LeaseRequest, Outcome

BUCKETS = 64
BATCHES, BATCH = 120, 20  # 2,400 messages
LEASE_MS = 5_000
RUN_TIMEOUT_S = 90.0
T = TypeVar("T")


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Ledger:
    """What the storage acknowledged, and every lease the consumers were given."""

    topic: str
    deadline: float  # monotonic
    produced: set[str] = field(default_factory=set)
    acked: set[str] = field(default_factory=set)
    holder: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (owner, until)
    # (id, owner) whose ack was refused: its lease was lost (a lease does not
    # wait for replicas), so another consumer may hold the message meanwhile
    refused: set[tuple[str, str]] = field(default_factory=set)
    early: list[str] = field(default_factory=list)
    doubly_held: list[str] = field(default_factory=list)  # an acked message leased again
    # (id, first holder, what happened): leased while another consumer held it
    overlaps: list[tuple[str, str, str]] = field(default_factory=list)
    produce_done: bool = False
    longest_call_s: float = 0.0

    async def retried(self, call: Callable[[], Awaitable[T]]) -> T:
        """``call`` again after ``StorageUnavailable``, as a broker retries, until the deadline."""
        started = time.monotonic()
        try:
            while True:
                try:
                    return await call()
                except StorageUnavailable:
                    if time.monotonic() > self.deadline:
                        raise
                    await asyncio.sleep(0.05)  # a caller's retry pause, not a wait in a test
        finally:
            self.longest_call_s = max(self.longest_call_s, time.monotonic() - started)

    async def until_produced(self, count: int) -> None:
        """Return once ``count`` messages were acknowledged."""
        while len(self.produced) < count:
            assert time.monotonic() < self.deadline, "the producer stalled"
            await asyncio.sleep(0.01)  # polling the run's progress

    async def produce(self, storage: Storage) -> None:
        for b in range(BATCHES):
            ids = [f"m{b:03d}-{i:02d}" for i in range(BATCH)]
            due = now_ms()
            batch = [NewMessage(id, due, id.encode(), bucket_of(id, BUCKETS)) for id in ids]
            statuses = await self.retried(partial(storage.insert, self.topic, batch))
            assert set(statuses) <= {InsertStatus.ACCEPTED, InsertStatus.DUPLICATE}
            self.produced.update(ids)
        self.produce_done = True

    async def consume(self, storage: Storage, owner: str) -> None:
        while not (self.produce_done and self.produced <= self.acked):
            if time.monotonic() > self.deadline:
                return
            now = now_ms()
            request = LeaseRequest(self.topic, None, now, 100, LEASE_MS, owner)
            leases = await self.retried(partial(storage.lease, request))
            for m in leases.delivered:
                if m.timestamp > now:
                    self.early.append(m.id)
                previous = self.holder.get(m.id)
                if m.id in self.acked:
                    self.doubly_held.append(f"{m.id} acked, leased again at {now} to {owner}")
                elif previous is not None and previous[0] != owner and previous[1] > now:
                    self.overlaps.append(
                        (m.id, previous[0], f"{m.id} held by {previous} at {now} to {owner}")
                    )
                self.holder[m.id] = (owner, leases.lease_until)
            items = [(m.id, m.version) for m in leases.delivered]
            if items:
                outcomes = await self.retried(partial(self._ack, storage, items, owner))
                for (id, _), outcome in zip(items, outcomes, strict=True):
                    # NotFound: an ack retried after a reply lost on the way; it was acked.
                    if isinstance(outcome, Settled | NotFound):
                        self.acked.add(id)
                    else:
                        self.refused.add((id, owner))
            else:
                await asyncio.sleep(0.01)  # an idle consumer's poll interval

    async def _ack(
        self, storage: Storage, items: list[tuple[str, int]], owner: str
    ) -> list[Outcome]:
        return await storage.ack(self.topic, items, owner, now_ms())

    def assert_nothing_lost_early_or_held_twice(self) -> None:
        assert len(self.produced) == BATCHES * BATCH
        assert self.produced - self.acked == set()
        assert self.early == []
        assert self.doubly_held == []
        # Held by two at once only after a lease lost with the killed server,
        # which its first holder's ack found (refused)
        assert [what for id, first, what in self.overlaps if (id, first) not in self.refused] == []


async def through_a_kill(
    url: str, topic: str, kill: Callable[[Ledger], Awaitable[int]]
) -> tuple[int, Ledger]:
    """Two storages (two brokers) on ``url``; a producer and two consumers run
    while ``kill`` kills a server mid-run (it returns the killed port). Checks
    that every acknowledged produce was delivered and acked, none early, none
    held by two consumers at once (but after a lease lost with the killed
    server: its holder's ack was refused), no acked message leased again, and that the
    store is empty (no acknowledged ack lost). The killed port and the ledger."""
    storages = [storage_from_url(url), storage_from_url(url)]
    for storage in storages:
        await storage.open()
    try:
        await storages[0].create_topic(Topic(topic, TopicSettings(buckets=BUCKETS)))
        ledger = Ledger(topic, time.monotonic() + RUN_TIMEOUT_S)
        killed, *_ = await asyncio.gather(
            kill(ledger),
            ledger.produce(storages[0]),
            ledger.consume(storages[0], "consumer-a"),
            ledger.consume(storages[1], "consumer-b"),
        )
        ledger.assert_nothing_lost_early_or_held_twice()
        counts = await ledger.retried(lambda: storages[1].counts(topic, now_ms()))
        assert (counts.waiting, counts.due, counts.leased) == (0, 0, 0)
        return killed, ledger
    finally:
        for storage in storages:
            await storage.close()
