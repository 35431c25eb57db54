"""``redis+cluster://`` through a master's death: with ``wait_replicas=1`` a master
killed with ``kill -9`` while producers and consumers run is replaced by its
replica, the same storage instances keep working without a restart, no
acknowledged produce or ack is lost, nothing is leased early, and no message is
held by two consumers at once. The killed node is started again afterwards; it
rejoins as a replica, and the session's cluster is healthy for later tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

import pytest

from dejaq.core.buckets import bucket_of
from dejaq.core.errors import NotFound, StorageUnavailable
from dejaq.core.model import InsertStatus, NewMessage, Settled, Topic, TopicSettings
from dejaq.storage_plugins import Storage, storage_from_url
from dejaq.storage_plugins.base import LeaseRequest, Outcome
from dejaq.storage_plugins.redis import keys as redis_keys
from tests.redis_cluster import RedisCluster

TOPIC = "failover"
BUCKETS = 64
BATCHES, BATCH = 120, 20  # 2,400 messages
KILL_AFTER = 30  # acknowledged batches before the kill
LEASE_MS = 5_000
RUN_TIMEOUT_S = 90.0
T = TypeVar("T")


def now_ms() -> int:
    return int(time.time() * 1000)


async def retried(call: Callable[[], Awaitable[T]], deadline: float) -> T:
    """``call`` again after ``StorageUnavailable``, as a broker retries, until ``deadline``."""
    while True:
        try:
            return await call()
        except StorageUnavailable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)  # the retry pause of a caller, not a wait in the test


@dataclass
class Ledger:
    """What the storage acknowledged, and every lease the consumers were given."""

    produced: set[str] = field(default_factory=set)
    acked: set[str] = field(default_factory=set)
    holder: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (owner, until)
    early: list[str] = field(default_factory=list)
    doubly_held: list[str] = field(default_factory=list)
    produce_done: bool = False


async def produce(storage: Storage, ledger: Ledger, deadline: float) -> None:
    for b in range(BATCHES):
        ids = [f"m{b:03d}-{i:02d}" for i in range(BATCH)]
        due = now_ms()
        batch = [NewMessage(id, due, id.encode(), bucket_of(id, BUCKETS)) for id in ids]
        statuses = await retried(partial(storage.insert, TOPIC, batch), deadline)
        assert set(statuses) <= {InsertStatus.ACCEPTED, InsertStatus.DUPLICATE}
        ledger.produced.update(ids)
    ledger.produce_done = True


async def ack(storage: Storage, items: list[tuple[str, int]], owner: str) -> list[Outcome]:
    return await storage.ack(TOPIC, items, owner, now_ms())


async def consume(storage: Storage, owner: str, ledger: Ledger, deadline: float) -> None:
    while not (ledger.produce_done and ledger.produced <= ledger.acked):
        if time.monotonic() > deadline:
            return
        now = now_ms()
        request = LeaseRequest(TOPIC, None, now, 100, LEASE_MS, owner)
        leases = await retried(partial(storage.lease, request), deadline)
        for m in leases.delivered:
            if m.timestamp > now:
                ledger.early.append(m.id)
            previous = ledger.holder.get(m.id)
            if m.id in ledger.acked or (
                previous is not None and previous[0] != owner and previous[1] > now
            ):
                ledger.doubly_held.append(m.id)
            ledger.holder[m.id] = (owner, leases.lease_until)
        items = [(m.id, m.version) for m in leases.delivered]
        if items:
            outcomes = await retried(partial(ack, storage, items, owner), deadline)
            for (id, _), outcome in zip(items, outcomes, strict=True):
                # NotFound: an ack retried after a reply lost on the way; it was acked.
                if isinstance(outcome, Settled | NotFound):
                    ledger.acked.add(id)
        else:
            await asyncio.sleep(0.01)  # an idle consumer's poll interval


async def kill_a_master_mid_run(cluster: RedisCluster, ledger: Ledger, deadline: float) -> int:
    while len(ledger.produced) < KILL_AFTER * BATCH:
        assert time.monotonic() < deadline, "the producer stalled before the kill"
        await asyncio.sleep(0.01)  # polling the run's progress
    victim = cluster.masters()[0]
    victim.kill()  # SIGKILL
    # The replica takes over (the cluster sees three masters again), then the
    # killed node comes back as its replica, so WAIT 1 is answered again.
    await asyncio.to_thread(cluster.wait_healthy)
    victim.start()
    await asyncio.to_thread(cluster.wait_healthy)
    return victim.port


async def test_a_killed_master_loses_no_acknowledged_produce_or_ack(
    redis_cluster: RedisCluster,
) -> None:
    # Given two storages (two brokers) on the cluster, waiting for a replica on every write
    redis_cluster.flush()
    url = f"{redis_cluster.url}?wait_replicas=1&wait_timeout_ms=1000"
    storages = [storage_from_url(url), storage_from_url(url)]
    for storage in storages:
        await storage.open()
    try:
        await storages[0].create_topic(Topic(TOPIC, TopicSettings(buckets=BUCKETS)))
        ledger = Ledger()
        deadline = time.monotonic() + RUN_TIMEOUT_S
        # When a producer and two consumers run and a master is killed mid-run
        killed, *_ = await asyncio.gather(
            kill_a_master_mid_run(redis_cluster, ledger, deadline),
            produce(storages[0], ledger, deadline),
            consume(storages[0], "consumer-a", ledger, deadline),
            consume(storages[1], "consumer-b", ledger, deadline),
        )
        # Then a replica took over from the killed master
        assert killed not in {n.port for n in redis_cluster.masters()}
        # And every acknowledged produce was delivered and acked
        assert len(ledger.produced) == BATCHES * BATCH
        assert ledger.produced - ledger.acked == set()
        # And nothing early, nothing held by two consumers, no acked message leased again
        assert ledger.early == []
        assert ledger.doubly_held == []
        # And the store is empty (no acknowledged ack lost)
        counts = await retried(lambda: storages[1].counts(TOPIC, now_ms()), deadline)
        assert (counts.waiting, counts.due, counts.leased) == (0, 0, 0)
    finally:
        for storage in storages:
            await storage.close()
        await asyncio.to_thread(redis_cluster.wait_healthy)


async def test_with_wait_replicas_a_write_no_replica_took_is_refused(
    redis_cluster: RedisCluster,
) -> None:
    # Given a topic on one hash slot, and that slot's master with its replica stopped
    redis_cluster.flush()
    url = f"{redis_cluster.url}?topic_slots=1&wait_replicas=1&wait_timeout_ms=300"
    waiting, plain = storage_from_url(url), storage_from_url(redis_cluster.url)
    await waiting.open()
    await plain.open()
    master = redis_cluster.master_of(redis_keys.Slot(TOPIC, 0).prefix)
    [replica_port] = master.replica_ports()
    replica = redis_cluster.node(replica_port)
    try:
        await waiting.create_topic(Topic(TOPIC, TopicSettings(buckets=8)))
        replica.pause()
        try:
            # When a produce waits for a replica that cannot answer
            # Then it is refused as unavailable (the caller retries it)
            with pytest.raises(StorageUnavailable, match="replicas acknowledged"):
                await waiting.insert(TOPIC, [NewMessage("a", 1, b"a", bucket_of("a", 8))])
            # And without WAIT the same master acknowledges at once
            assert await plain.insert(TOPIC, [NewMessage("b", 1, b"b", bucket_of("b", 8))]) == [
                InsertStatus.ACCEPTED
            ]
        finally:
            replica.resume()
        # And once the replica is back, a retried produce is acknowledged
        statuses = await waiting.insert(TOPIC, [NewMessage("a", 1, b"a", bucket_of("a", 8))])
        assert statuses in ([InsertStatus.ACCEPTED], [InsertStatus.DUPLICATE])
    finally:
        await waiting.close()
        await plain.close()
        await asyncio.to_thread(redis_cluster.wait_healthy)
