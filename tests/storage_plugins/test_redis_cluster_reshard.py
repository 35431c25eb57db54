"""``redis+cluster://`` while the cluster moves a topic's hash slots to another
master (``redis-cli --cluster reshard``) under a steady load: the same storage
instances keep working, nothing acknowledged is lost, nothing is early, no
message is held by two consumers at once, and calls on a moving slot wait for
the end of its move (the longest call is printed)."""

from __future__ import annotations

import asyncio
import time

import pytest
from redis.crc import key_slot

from dejaq.core.errors import StorageUnavailable
from dejaq.core.model import Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis.options import CLUSTER_TOPIC_SLOTS
from tests.redis_cluster import ClusterNode, RedisCluster
from tests.storage_plugins.cluster_load import BATCH, BUCKETS, RUN_TIMEOUT_S, Ledger, now_ms
from tests.storage_plugins.redis_support import msg

MOVE_AFTER = 30  # acknowledged batches before the move
MOST_SLOTS_MOVED = 400  # the move takes the first slots of a master: keep it short


def hash_slots(topic: str) -> list[int]:
    n = CLUSTER_TOPIC_SLOTS
    return [key_slot(redis_keys.Slot(topic, i, n).prefix.encode()) for i in range(n)]


def a_topic_near_a_range_start(cluster: RedisCluster) -> tuple[str, int, ClusterNode, int]:
    """A topic name, one of its hash slots that is among the first few of its
    master's slots, that master, and how many slots to move to take it along."""
    owners = cluster.slot_map()
    firsts: dict[int, list[int]] = {}
    for slot, port in sorted(owners.items()):
        firsts.setdefault(port, []).append(slot)
    for k in range(10_000):
        topic = f"reshard-{k}"
        for slot in hash_slots(topic):
            position = firsts[owners[slot]].index(slot)
            if position < MOST_SLOTS_MOVED:
                return topic, slot, cluster.node(owners[slot]), position + 1
    raise AssertionError("no topic name with a hash slot near the start of a master's range")


async def test_a_reshard_under_load_loses_nothing_and_stalls_only_the_moving_slot(
    redis_cluster: RedisCluster,
) -> None:
    # Given a topic with a hash slot among the first of its master's, and two storages
    redis_cluster.flush()
    topic, moving, source, count = a_topic_near_a_range_start(redis_cluster)
    target = next(n for n in redis_cluster.masters() if n.port != source.port)
    storages = [storage_from_url(redis_cluster.url), storage_from_url(redis_cluster.url)]
    for storage in storages:
        await storage.open()
    try:
        await storages[0].create_topic(Topic(topic, TopicSettings(buckets=BUCKETS)))
        ledger = Ledger(topic, time.monotonic() + RUN_TIMEOUT_S)

        async def move_mid_run() -> None:
            await ledger.until_produced(MOVE_AFTER * BATCH)
            await asyncio.to_thread(redis_cluster.reshard, source, target, count)

        # When a producer and two consumers run while the slot moves to another master
        await asyncio.gather(
            move_mid_run(),
            ledger.produce(storages[0]),
            ledger.consume(storages[0], "consumer-a"),
            ledger.consume(storages[1], "consumer-b"),
        )
        # Then the slot moved
        assert redis_cluster.slot_map()[moving] == target.port
        # And nothing acknowledged was lost, nothing early, nothing held twice
        ledger.assert_nothing_lost_early_or_held_twice()
        counts = await ledger.retried(lambda: storages[1].counts(topic, now_ms()))
        assert (counts.waiting, counts.due, counts.leased) == (0, 0, 0)
        print(f"reshard of {count} slots: longest call {ledger.longest_call_s * 1000:.0f} ms")
    finally:
        for storage in storages:
            await storage.close()


async def test_a_call_on_a_half_moved_slot_waits_and_changes_nothing(
    redis_cluster: RedisCluster,
) -> None:
    # Given a topic on one hash slot: a0 and a1 leased, a dead message and an
    # acked one (so every key a settle declares exists: the cluster lets it run)
    redis_cluster.flush()
    url = f"{redis_cluster.url}?topic_slots=1&socket_timeout_ms=500"
    storage = storage_from_url(url)
    await storage.open()
    topic = "half-moved"
    s = redis_keys.Slot(topic, 0, 1)
    slot = key_slot(s.prefix.encode())
    source = redis_cluster.master_of(s.prefix)
    target = next(n for n in redis_cluster.masters() if n.port != source.port)
    try:
        await storage.create_topic(Topic(topic, TopicSettings(buckets=8)))
        given = [msg("a0", ts=1), msg("a1", ts=2), msg("d", ts=3), msg("t", ts=4)]
        await storage.insert(topic, given)
        leases = await storage.lease(LeaseRequest(topic, None, 10, 10, 1_000, "c"))
        held = {m.id: m.version for m in leases.delivered}
        await storage.nack(topic, [("d", held["d"])], "c", 20, 1)
        await storage.ack(topic, [("t", held["t"])], "c", 20)
        assert (await storage.counts(topic, 20)).dead == 1
        # And the slot is being moved, its records already on the other master
        redis_cluster.begin_move(slot, source, target)
        redis_cluster.migrate(source, target, [s.records, s.payloads])
        # When the leases of a0 and a1 are extended on the half-moved slot
        items = [("a0", held["a0"]), ("a1", held["a1"])]
        # Then the call is refused as unavailable (the caller retries)
        with pytest.raises(StorageUnavailable):
            await storage.extend(topic, items, "c", 5_000)
        # And once the move is over, the retried call extends both at the
        # versions held: the refused one changed nothing (no half-run script)
        redis_cluster.finish_move(slot, source, target)
        outcomes = await storage.extend(topic, items, "c", 5_000)
        assert [type(o).__name__ for o in outcomes] == ["Settled", "Settled"]
        assert redis_cluster.slot_map()[slot] == target.port
    finally:
        await storage.close()
