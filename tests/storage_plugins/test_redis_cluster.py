"""What only ``redis+cluster://`` promises beyond the conformance suite: its URL,
and a topic spread over the cluster's masters (the conformance suite runs on the
cluster through the ``storage`` fixture; failover is in
``test_redis_cluster_failover.py``)."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from dejaq.core.errors import InvalidArgument, StorageError
from dejaq.core.model import Counts, Settled, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.cluster import RedisClusterStorage
from dejaq.storage_plugins.redis.options import CLUSTER_TOPIC_SLOTS, parse_url
from tests.redis_cluster import RedisCluster
from tests.storage_plugins.redis_support import msg

# -- URL ------------------------------------------------------------------------


def test_a_cluster_url_names_its_seeds_and_defaults_to_6_slots_a_topic() -> None:
    options = parse_url("redis+cluster://u:p%40ss@a:7000,b:7001/0?wait_replicas=1")
    assert options.seeds == (("a", 7000), ("b", 7001))
    assert (options.username, options.password) == ("u", "p@ss")
    assert options.wait_replicas == 1
    assert options.topic_slots == CLUSTER_TOPIC_SLOTS == 6
    assert parse_url("redis+cluster://a:7000?topic_slots=4").topic_slots == 4
    assert isinstance(storage_from_url("redis+cluster://a:7000/0"), RedisClusterStorage)


def test_a_tls_cluster_url_takes_the_rediss_options() -> None:
    options = parse_url("rediss+cluster://a:7000/0?ssl_check_hostname=false")
    assert options.tls_arguments()["ssl_check_hostname"] is False
    assert parse_url("redis+cluster://a:7000/0").tls_arguments() == {}


@pytest.mark.parametrize(
    "bad",
    [
        "redis+cluster://a:7000/1",  # a cluster has only database 0
        "redis+cluster://a/0",  # no port
        "redis+cluster://a:7000,b/0",
        "redis+cluster://a:x/0",
        "redis+cluster://a:7000/0?wait=1",
        "redis+cluster://a:7000/0?ssl_check_hostname=false",  # TLS option without TLS
    ],
)
def test_a_bad_cluster_url_is_refused_by_name(bad: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_url(bad)


# -- spread ---------------------------------------------------------------------


def _master_of_slots(cluster: RedisCluster) -> dict[int, int]:
    """Hash slot -> the port of the master serving it."""
    [first] = cluster.masters()[:1]
    with first.client() as client:
        ranges = client.execute_command("CLUSTER", "SLOTS")
    out: dict[int, int] = {}
    for low, high, master, *_ in ranges:
        for slot in range(int(low), int(high) + 1):
            out[slot] = int(master[1])
    return out


async def test_a_topic_spreads_over_every_master_and_each_slot_keeps_its_keys_together(
    redis_cluster: RedisCluster,
) -> None:
    # Given a topic of 64 buckets on the cluster (6 slots by default)
    redis_cluster.flush()
    storage = storage_from_url(redis_cluster.url)
    await storage.open()
    try:
        await storage.create_topic(Topic("spread", TopicSettings(buckets=64)))
        # When messages are produced into every bucket
        await storage.insert("spread", [msg(f"m{i}", buckets=64) for i in range(500)])
    finally:
        await storage.close()
    # Then every key of a topic slot is in that slot's one hash slot
    masters = _master_of_slots(redis_cluster)
    by_master: dict[int, int] = {}
    for index in range(CLUSTER_TOPIC_SLOTS):
        prefix = redis_keys.Slot("spread", index, CLUSTER_TOPIC_SLOTS).prefix
        slot = key_slot(prefix.encode())
        node = next(n for n in redis_cluster.masters() if n.port == masters[slot])
        with node.client() as client:
            found = list(client.scan_iter(match=prefix + "*", count=1000))
        assert found, f"slot {index} holds no key"
        assert {key_slot(k) for k in found} == {slot}
        by_master[masters[slot]] = by_master.get(masters[slot], 0) + len(found)
    # And the topic's keys are on all three masters
    assert len(by_master) == 3


@pytest.mark.parametrize("slots", [3, 6, 12])
async def test_a_topic_s_keys_and_messages_split_evenly_over_the_masters(
    redis_cluster: RedisCluster, slots: int
) -> None:
    # Given topics over a multiple of the 3 masters' count of slots
    redis_cluster.flush()
    storage = storage_from_url(f"{redis_cluster.url}?topic_slots={slots}")
    await storage.open()
    names = ["orders", "emails", "a", "billing.retries", "t-42"]
    try:
        for name in names:
            await storage.create_topic(Topic(name, TopicSettings(buckets=96)))
            # When messages are produced into every bucket
            batch = [msg(f"m{i}", buckets=96) for i in range(3000)]
            await storage.insert(name, batch)
    finally:
        await storage.close()
    # Then each topic's keys and messages fall within 15% of a third on each master
    masters = _master_of_slots(redis_cluster)
    for name in names:
        keys_on: dict[int, int] = dict.fromkeys(set(masters.values()), 0)
        messages_on = dict(keys_on)
        for index in range(slots):
            s = redis_keys.Slot(name, index, slots)
            port = masters[key_slot(s.prefix.encode())]
            node = next(n for n in redis_cluster.masters() if n.port == port)
            with node.client() as client:
                keys_on[port] += len(client.keys(s.prefix + "*"))
                messages_on[port] += client.hlen(s.records)
        for spread in (keys_on, messages_on):
            share = sum(spread.values()) / 3
            assert all(abs(n - share) <= 0.15 * share for n in spread.values()), (name, spread)


async def test_with_wait_replicas_a_lease_works_after_every_master_forgets_its_scripts(
    redis_cluster: RedisCluster,
) -> None:
    # Given messages on a topic spread over the masters, written with WAIT 1
    redis_cluster.flush()
    storage = storage_from_url(f"{redis_cluster.url}?wait_replicas=1&wait_timeout_ms=2000")
    await storage.open()
    try:
        await storage.create_topic(Topic("lost", TopicSettings(buckets=16)))
        assert await storage.insert("lost", [msg(f"m{i}", ts=1, buckets=16) for i in range(40)])
        # When every master has lost its scripts before a lease pass
        for node in redis_cluster.masters():
            with node.client() as client:
                client.script_flush()
        leases = await storage.lease(LeaseRequest("lost", None, 10, 100, 1_000, "c"))
        # Then the pass reloaded them and leased every message once
        assert sorted(m.id for m in leases.delivered) == sorted(f"m{i}" for i in range(40))
        for node in redis_cluster.masters():
            with node.client() as client:
                assert client.script_exists(lua.CLUSTER[lua.LEASE].sha) == [True]
    finally:
        await storage.close()


def _time_calls(cluster: RedisCluster) -> dict[int, int]:
    """Per master's port: how many TIME commands it has run."""
    out = {}
    for node in cluster.masters():
        with node.client() as client:
            stats = client.info("commandstats")
        out[node.port] = int(stats.get("cmdstat_time", {}).get("calls", 0))
    return out


async def test_every_broker_reads_the_clock_of_the_registry_s_master(
    redis_cluster: RedisCluster,
) -> None:
    # Given a storage on the cluster
    storage = storage_from_url(redis_cluster.url)
    await storage.open()
    try:
        before = _time_calls(redis_cluster)
        # When it reads the storage clock five times
        for _ in range(5):
            assert await storage.server_time_us()
        # Then the master of the topic registry answered every time, the others never
        after = _time_calls(redis_cluster)
        registry = redis_cluster.master_of(redis_keys.TOPICS).port
        assert {port: after[port] - before.get(port, 0) for port in after} == {
            port: 5 if port == registry else 0 for port in after
        }
    finally:
        await storage.close()


async def test_messages_go_through_a_tls_cluster(
    tls_redis_cluster: RedisCluster,
) -> None:
    # Given a cluster that takes only TLS with a client certificate
    tls_redis_cluster.flush()
    storage = storage_from_url(tls_redis_cluster.url)
    assert tls_redis_cluster.url.startswith("rediss+cluster://")
    await storage.open()
    try:
        # When a topic spread over its masters gets messages, leased and acked
        await storage.create_topic(Topic("tls", TopicSettings(buckets=16)))
        await storage.insert("tls", [msg(f"m{i}", ts=1, buckets=16) for i in range(40)])
        leases = await storage.lease(LeaseRequest("tls", None, 10, 100, 1_000, "c"))
        outcomes = await storage.ack("tls", [(m.id, m.version) for m in leases.delivered], "c", 20)
        # Then every message went through, and none is left
        assert sorted(m.id for m in leases.delivered) == sorted(f"m{i}" for i in range(40))
        assert all(isinstance(o, Settled) for o in outcomes)
        assert await storage.counts("tls", 20) == Counts()
    finally:
        await storage.close()
    # And a client without a certificate is refused at open
    bare = tls_redis_cluster.url.split("&ssl_certfile")[0]
    refused = storage_from_url(bare)
    with pytest.raises(StorageError):
        await refused.open()
