"""``redis+cluster://`` with one master hung or cut off from its replica: the
other masters' slots keep being delivered, and with ``wait_replicas`` a lease
pass does not wait for replicas (a lease lost in a failover only means a
redelivery), while a produce still does."""

from __future__ import annotations

import asyncio
import time

import pytest

from dejaq.core.buckets import bucket_of
from dejaq.core.errors import StorageUnavailable
from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest, Storage
from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis.cluster import RedisClusterStorage
from tests.redis_cluster import ClusterNode, RedisCluster
from tests.storage_plugins.cluster_load import BUCKETS, now_ms

TOPIC = "stall"
DELIVERY_TIMEOUT_S = 20.0  # a bound on a story's passes, far above what they need
LONG_LEASE_MS = 120_000  # far beyond DELIVERY_TIMEOUT_S


async def given_due_messages(storage: RedisClusterStorage, count: int) -> list[str]:
    await storage.create_topic(Topic(TOPIC, TopicSettings(buckets=BUCKETS)))
    ids = [f"m{i}" for i in range(count)]
    due = now_ms()
    await storage.insert(TOPIC, [NewMessage(i, due, b"x", bucket_of(i, BUCKETS)) for i in ids])
    return ids


def slots_of(cluster: RedisCluster, master: ClusterNode, slots: int) -> set[int]:
    """The topic's slots ``master`` serves."""
    return {
        s
        for s in range(slots)
        if cluster.master_of(redis_keys.Slot(TOPIC, s, slots).prefix).port == master.port
    }


def slot_of(id: str, slots: int) -> int:
    return bucket_of(id, BUCKETS) * slots // BUCKETS


async def lease_until(storage: Storage, wanted: set[str]) -> list[str]:
    """Lease passes, as a dispatcher runs them (each retried after
    ``StorageUnavailable``), until ``wanted`` are delivered or the bound passes;
    every id delivered."""
    got: list[str] = []
    deadline = time.monotonic() + DELIVERY_TIMEOUT_S
    while not wanted <= set(got) and time.monotonic() < deadline:
        request = LeaseRequest(TOPIC, None, now_ms(), 1000, 60_000, "c1")
        try:
            got += [m.id for m in (await storage.lease(request)).delivered]
        except StorageUnavailable:
            await asyncio.sleep(0.05)  # a dispatcher's retry pause, not a wait in a test
    return got


async def test_a_hung_master_holds_up_only_its_own_slots(redis_cluster: RedisCluster) -> None:
    # Given a topic over every master with due messages in each of its slots
    redis_cluster.flush()
    storage = storage_from_url(redis_cluster.url)
    assert isinstance(storage, RedisClusterStorage)
    await storage.open()
    try:
        ids = await given_due_messages(storage, 300)
        slots = storage.options.topic_slots
        # and one master (not the registry's) hung: it takes calls and answers none
        registry = redis_cluster.master_of(redis_keys.TOPICS)
        victim = next(
            m
            for m in redis_cluster.masters()
            if m.port != registry.port and slots_of(redis_cluster, m, slots)
        )
        hung = slots_of(redis_cluster, victim, slots)
        others = {i for i in ids if slot_of(i, slots) not in hung}
        with redis_cluster.hung(victim):
            # When passes lease while it is stopped
            got = await lease_until(storage, others)
            # Then every message of the other masters' slots is delivered before
            # it runs again, and none of its own
            assert sorted(got) == sorted(others)
    finally:
        await storage.close()


async def test_with_wait_replicas_a_master_without_its_replica_still_delivers(
    redis_cluster: RedisCluster,
) -> None:
    # Given a storage waiting for a replica, a topic over every master with due messages
    redis_cluster.flush()
    url = f"{redis_cluster.url}?wait_replicas=1&wait_timeout_ms=300"
    storage = storage_from_url(url)
    assert isinstance(storage, RedisClusterStorage)
    await storage.open()
    try:
        ids = await given_due_messages(storage, 300)
        # and one master holding some of its slots cut off from its replica
        slots = storage.options.topic_slots
        victim = redis_cluster.master_of(redis_keys.Slot(TOPIC, 0, slots).prefix)
        mine = next(f"new{i}" for i in range(1000) if slot_of(f"new{i}", slots) == 0)
        [replica_port] = victim.replica_ports()
        replica = redis_cluster.node(replica_port)
        replica.pause()
        try:
            # When passes lease
            got = await lease_until(storage, set(ids))
            # Then every message is delivered, the cut-off master's too: a lease
            # move does not wait for replicas
            assert sorted(got) == sorted(ids)
            # And reads do not wait either
            assert (await storage.counts(TOPIC, now_ms())).leased == len(ids)
            # And a produce on that master still waits for its replica, and is refused
            new = NewMessage(mine, now_ms(), b"x", bucket_of(mine, BUCKETS))
            with pytest.raises(StorageUnavailable, match="replicas acknowledged"):
                await storage.insert(TOPIC, [new])
        finally:
            replica.resume()
    finally:
        await storage.close()
        await asyncio.to_thread(redis_cluster.wait_healthy)


async def test_leases_a_hung_master_grants_late_are_handed_back_at_once(
    redis_cluster: RedisCluster,
) -> None:
    # Given a topic over every master whose last pass took everything due (so
    # the next sends every slot its lease script at once), and more due since
    redis_cluster.flush()
    storage = storage_from_url(redis_cluster.url)
    assert isinstance(storage, RedisClusterStorage)
    await storage.open()
    try:
        first = await given_due_messages(storage, 30)
        assert sorted(await lease_until(storage, set(first))) == sorted(first)
        due = now_ms()
        ids = [f"n{i}" for i in range(300)]
        await storage.insert(TOPIC, [NewMessage(i, due, b"x", bucket_of(i, BUCKETS)) for i in ids])
        slots = storage.options.topic_slots
        registry = redis_cluster.master_of(redis_keys.TOPICS)
        victim = next(
            m
            for m in redis_cluster.masters()
            if m.port != registry.port and slots_of(redis_cluster, m, slots)
        )
        hung = slots_of(redis_cluster, victim, slots)
        theirs = {i for i in ids if slot_of(i, slots) in hung}
        # When a pass leases while that master is stopped for a moment
        victim.pause()
        try:
            request = LeaseRequest(TOPIC, None, now_ms(), 1000, LONG_LEASE_MS, "c1")
            got = [m.id for m in (await storage.lease(request)).delivered]
        finally:
            victim.resume()
        # Then that pass delivered none of its messages
        assert not set(got) & theirs
        # And the leases its late answer granted are handed back: its messages
        # are delivered again long before those leases would run out
        assert theirs <= set(await lease_until(storage, theirs))
    finally:
        await storage.close()
