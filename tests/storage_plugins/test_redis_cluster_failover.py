"""``redis+cluster://`` through a master's death: with ``wait_replicas=1`` a master
killed with ``kill -9`` while producers and consumers run is replaced by its
replica, the same storage instances keep working without a restart, no
acknowledged produce or ack is lost, nothing is leased early, and no message is
held by two consumers at once unless the first one's lease was lost with the
master (leases do not wait for replicas: that consumer's ack is refused, and
the message is delivered again). The killed node is started again afterwards; it
rejoins as a replica, and the session's cluster is healthy for later tests."""

from __future__ import annotations

import asyncio

import pytest

from dejaq.core.buckets import bucket_of
from dejaq.core.errors import StorageUnavailable
from dejaq.core.model import InsertStatus, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.redis import keys as redis_keys
from tests.redis_cluster import RedisCluster
from tests.storage_plugins.cluster_load import BATCH, Ledger, through_a_kill

TOPIC = "failover"
KILL_AFTER = 30  # acknowledged batches before the kill


async def kill_a_master_mid_run(cluster: RedisCluster, ledger: Ledger) -> int:
    await ledger.until_produced(KILL_AFTER * BATCH)
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
    # Given two storages (two brokers) on the cluster, waiting for a replica on
    # every produce and ack
    redis_cluster.flush()
    url = f"{redis_cluster.url}?wait_replicas=1&wait_timeout_ms=1000"
    try:
        # When a producer and two consumers run and a master is killed mid-run,
        # then nothing acknowledged is lost, early or held twice (through_a_kill)
        killed, ledger = await through_a_kill(
            url, TOPIC, lambda ledger: kill_a_master_mid_run(redis_cluster, ledger)
        )
        # And a replica took over from the killed master
        assert killed not in {n.port for n in redis_cluster.masters()}
        print(f"failover: longest call {ledger.longest_call_s * 1000:.0f} ms")
    finally:
        await asyncio.to_thread(redis_cluster.wait_healthy)


async def test_with_wait_replicas_a_write_no_replica_took_is_refused(
    redis_cluster: RedisCluster,
) -> None:
    # Given a topic on one hash slot, and that slot's master with its replica stopped
    redis_cluster.flush()
    url = f"{redis_cluster.url}?topic_slots=1&wait_replicas=1&wait_timeout_ms=300"
    waiting, plain = storage_from_url(url), storage_from_url(redis_cluster.url)
    other = storage_from_url(url)
    for storage in (waiting, plain, other):
        await storage.open()
    master = redis_cluster.master_of(redis_keys.Slot(TOPIC, 0, 1).prefix)
    [replica_port] = master.replica_ports()
    replica = redis_cluster.node(replica_port)
    try:
        await waiting.create_topic(Topic(TOPIC, TopicSettings(buckets=8)))
        await other.get_topic(TOPIC)
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
            # And a produce of another broker finding it there (written, not
            # replicated yet) is not acknowledged as a duplicate either
            with pytest.raises(StorageUnavailable, match="replicas acknowledged"):
                await other.insert(TOPIC, [NewMessage("b", 1, b"b", bucket_of("b", 8))])
        finally:
            replica.resume()
        # And once the replica is back, a retried produce is acknowledged
        statuses = await waiting.insert(TOPIC, [NewMessage("a", 1, b"a", bucket_of("a", 8))])
        assert statuses in ([InsertStatus.ACCEPTED], [InsertStatus.DUPLICATE])
    finally:
        for storage in (waiting, plain, other):
            await storage.close()
        await asyncio.to_thread(redis_cluster.wait_healthy)
