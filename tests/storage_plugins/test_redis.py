"""What only the redis:// backend promises, part one: Redis Cluster slotting,
scripts that survive the server forgetting them, WAIT for replicas, failing fast
(never hanging) when the server dies or stalls, and topic caches that cannot go
stale. The passes and the heads index are in ``test_redis_passes.py``."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest
from redis.crc import key_slot

from dejaq.core.buckets import bucket_of
from dejaq.core.errors import (
    InvalidArgument,
    NotFound,
    StorageError,
    StorageUnavailable,
)
from dejaq.core.model import Counts, InsertStatus
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis import record as redis_record
from dejaq.storage_plugins.redis import scripts as redis_scripts
from dejaq.storage_plugins.redis.options import parse_url
from tests.redis_server import RedisServer
from tests.storage_plugins.redis_support import (
    ACCEPTED,
    HANG_GUARD_S,
    LEASE,
    NOW,
    T,
    given_topic,
    msg,
    opened,
)

# -- URL ------------------------------------------------------------------------


def test_url_options_are_read_and_unknown_ones_refused() -> None:
    options = parse_url("redis://h:7000/3?wait_replicas=2&wait_timeout_ms=50&socket_timeout_ms=9")
    assert (options.url, options.wait_replicas, options.wait_timeout_ms) == (
        "redis://h:7000/3",
        2,
        50,
    )
    assert options.socket_timeout_ms == 9
    for bad in ("redis://h/0?wait=1", "redis://h/0?wait_timeout_ms=0", "redis://h/x", "redis:///0"):
        with pytest.raises(InvalidArgument):
            parse_url(bad)


# -- Redis Cluster slotting -----------------------------------------------------


@pytest.mark.parametrize("slots", [1, 8])
async def test_every_key_of_a_topic_is_in_one_of_its_cluster_slots(
    server: RedisServer, slots: int
) -> None:
    # given messages in every state (waiting, leased, dead) on a topic of 8 buckets
    async with opened(f"{server.url}?topic_slots={slots}") as storage:
        await given_topic(storage, buckets=8)
        ids = [f"m{i}" for i in range(200)]
        await storage.insert(T, [msg(i, NOW + 1) for i in ids[:2]])  # waiting
        await storage.insert(T, [msg("dies", NOW - 1, expires_at=1), *map(msg, ids[2:])])
        leases = await storage.lease(LeaseRequest.of(T, None, NOW, 50, LEASE, "c1", 0))
        assert (len(leases.delivered), leases.dead_lettered) == (50, 1)
    # when every key is listed
    with server.client() as client:
        names = [k.decode() for k in client.keys(f"{redis_keys.NAMESPACE}:*")]
    # then each key but the registry and the format carries the hash tag of a topic slot
    tags = {f"{{{tag}}}": key_slot(tag.encode()) for tag in redis_keys.tags(T, slots)}
    tagged = [k for k in names if k not in (redis_keys.TOPICS, redis_keys.FORMAT)]
    assert {k[k.index("{") : k.index("}") + 1] for k in tagged} == set(tags)
    assert all(key_slot(k.encode()) == tags[k[k.index("{") : k.index("}") + 1]] for k in tagged)
    # and a message's record (its small payload inline) is in the slot of its bucket's range
    for id in ids:
        slot = redis_keys.Slot(T, bucket_of(id, 8) * slots // 8, slots)
        with server.client() as client:
            assert client.hexists(slot.records, id)
        assert slot.timeline(bucket_of(id, 8)) in names
    assert redis_keys.Slot(T, bucket_of("dies", 8) * slots // 8, slots).dead in names


def test_the_topic_slots_option_is_read() -> None:
    assert parse_url("redis://h/0").topic_slots == 1
    assert parse_url("redis://h/0?topic_slots=16").topic_slots == 16
    with pytest.raises(InvalidArgument):
        parse_url("redis://h/0?topic_slots=0")


async def test_a_topic_keeps_the_slots_it_was_created_with(server: RedisServer) -> None:
    # given a topic created by a broker whose URL asks for 4 slots
    async with opened(f"{server.url}?topic_slots=4") as a, opened(server.url) as b:
        await given_topic(a, buckets=8)
        # when a broker whose URL says 1 slot produces and leases
        batch = [msg(f"m{i}") for i in range(40)]
        assert await b.insert(T, batch) == [ACCEPTED] * 40
        leases = await a.lease(LeaseRequest.of(T, None, NOW, 100, LEASE, "c1", 0))
        # then both use the topic's 4 slots
        assert sorted(d.id for d in leases.delivered) == sorted(m.id for m in batch)
    with server.client() as client:
        assert {k.decode() for k in client.keys(f"*{T}:*alive")} == {
            redis_keys.Slot(T, i, 4).alive for i in range(4)
        }


# -- scripts --------------------------------------------------------------------


async def test_calls_work_after_the_server_forgets_its_scripts(server: RedisServer) -> None:
    async with opened(server.url) as storage:
        await given_topic(storage)
        # given a server that has lost every script
        with server.client() as client:
            client.script_flush()
        # when a batch spanning many buckets is inserted (one MULTI of scripts)
        batch = [msg(f"m{i}") for i in range(40)]
        # then every message is accepted once, not reported a duplicate on the resend
        assert await storage.insert(T, batch) == [ACCEPTED] * 40
        with server.client() as client:
            client.script_flush()
        leases = await storage.lease(LeaseRequest.of(T, None, NOW, 100, LEASE, "c1", 0))
        assert sorted(d.id for d in leases.delivered) == sorted(m.id for m in batch)
        with server.client() as client:
            assert all(client.script_exists(*(s.sha for s in redis_scripts.ALL)))


# -- replicas -------------------------------------------------------------------


async def test_waiting_for_a_replica_that_does_not_exist_fails_fast(server: RedisServer) -> None:
    async with opened(f"{server.url}?wait_replicas=1&wait_timeout_ms=50") as storage:
        await given_topic(storage)
        async with asyncio.timeout(HANG_GUARD_S):
            with pytest.raises(StorageUnavailable, match="0 of 1 replicas"):
                await storage.insert(T, [msg("a"), msg("b")])
        # the primary has the write: a retried produce finds the ids as duplicates
    async with opened(server.url) as storage:
        assert await storage.insert(T, [msg("a")]) == [InsertStatus.DUPLICATE]


# -- a server that dies or stalls -----------------------------------------------


async def test_a_killed_server_is_unavailable_and_a_restarted_one_serves(
    own_redis: RedisServer,
) -> None:
    async with opened(f"{own_redis.url}?socket_timeout_ms=1000") as storage:
        await given_topic(storage)
        await storage.insert(T, [msg("a")])
        # when the server is killed
        own_redis.kill()
        # then calls fail at once with StorageUnavailable, not hang
        async with asyncio.timeout(HANG_GUARD_S):
            with pytest.raises(StorageUnavailable):
                await storage.insert(T, [msg("b")])
            with pytest.raises(StorageUnavailable):
                await storage.lease(LeaseRequest.of(T, None, NOW, 10, LEASE, "c1", 0))
            assert not await storage.healthy()
        # when it is back on the same port (empty: it kept nothing)
        own_redis.start()
        # then the first call already reconnects (the pool drops dead connections)
        assert await storage.healthy()
        # and the topic this instance had cached is found gone; a new one works
        with pytest.raises(NotFound):
            await storage.insert(T, [msg("b")])
        await given_topic(storage)
        assert await storage.insert(T, [msg("b")]) == [ACCEPTED]
        assert await storage.counts(T, NOW) == Counts(due=1)


async def test_a_stalled_server_times_out(own_redis: RedisServer) -> None:
    async with opened(f"{own_redis.url}?socket_timeout_ms=200") as storage:
        await given_topic(storage)
        assert own_redis.process is not None
        os.kill(own_redis.process.pid, signal.SIGSTOP)
        try:
            async with asyncio.timeout(HANG_GUARD_S):
                with pytest.raises(StorageUnavailable):
                    await storage.counts(T, NOW)
        finally:
            os.kill(own_redis.process.pid, signal.SIGCONT)


# -- topic caches ---------------------------------------------------------------


async def test_a_topic_deleted_and_recreated_elsewhere_is_not_written_stale(
    server: RedisServer,
) -> None:
    async with opened(server.url) as a, opened(server.url) as b:
        # given broker A has used the topic with 4 buckets
        await given_topic(a, buckets=4)
        await a.insert(T, [msg("x", buckets=4)])
        # when broker B deletes it and creates it again with 16 buckets
        await b.delete_topic(T)
        with pytest.raises(NotFound):
            await a.lease(LeaseRequest.of(T, None, NOW, 10, LEASE, "c1", 0))
        await given_topic(b, buckets=16)
        # then A's next produce lands in the new topic, in the slot of 16 buckets
        assert await a.insert(T, [msg("y", buckets=16)]) == [ACCEPTED]
        assert (await b.get(T, "y")).bucket == bucket_of("y", 16)
        with pytest.raises(NotFound):
            await b.get(T, "x")


async def test_a_topic_stored_by_the_per_bucket_layout_is_refused_clearly(
    server: RedisServer,
) -> None:
    # given a registry entry written before topics had slots and a heads index
    entry = '{"settings": {"buckets": 8}, "created_at_ms": 0, "gen": "g"}'
    with server.client() as client:
        client.hset(redis_keys.TOPICS, T, entry)
    # then it is refused with a way out, not misread
    async with opened(server.url) as storage:
        with pytest.raises(StorageError, match="older dejaq"):
            await storage.lease(LeaseRequest.of(T, None, NOW, 10, LEASE, "c1", 0))


# -- tombstones: bounded by count as well as by the window -----------------------


@pytest.mark.parametrize("slots", [1, 4])
async def test_a_sweep_keeps_only_the_newest_max_tombstones(
    server: RedisServer, slots: int, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a topic that keeps at most 20 tombstones, and 50 messages acked one
    # at a time (each a millisecond later than the one before)
    async with opened(f"{server.url}?max_tombstones=20&topic_slots={slots}") as storage:
        await given_topic(storage)
        ids = [f"m{i:02d}" for i in range(50)]
        assert await storage.insert(T, [msg(i) for i in ids]) == [ACCEPTED] * 50
        deleted_order = []  # as acked: each tombstone a millisecond younger
        for k in range(len(ids)):
            leases = await storage.lease(LeaseRequest.of(T, None, NOW + k, 1, LEASE, "c"))
            [m] = leases.delivered
            await storage.ack(T, [(m.id, m.version)], "c", NOW + k)
            deleted_order.append(m.id)
        # When a sweep runs while none is older than the window
        forgotten = await storage.purge_tombstones(T, 0, 1_000)
        # Then it forgot the oldest beyond the bound (each slot keeps its share,
        # rounded up), and the ids it kept are still taken, the others free again
        again = await storage.insert(T, [msg(i) for i in deleted_order])
        taken = [id for id, st in zip(deleted_order, again, strict=True) if st != ACCEPTED]
        assert forgotten == 50 - len(taken)
        assert 0 < len(taken) <= 20 + slots - 1
        assert deleted_order[-1] in taken
        if slots == 1:  # one set: exactly the newest 20
            assert taken == deleted_order[-20:]
        # and the operator is told that ids left their window early, once
        told = [r for r in caplog.records if "inside the topic's dedup window" in r.message]
        assert len(told) == 1 and f"{forgotten} tombstones" in told[0].message
        # and a second sweep finds nothing more to forget
        assert await storage.purge_tombstones(T, 0, 1_000) == 0


async def test_a_tombstone_forgotten_and_written_again_is_kept_for_its_new_time(
    server: RedisServer,
) -> None:
    # Given an id acked, its tombstone forgotten, then produced and acked again
    # later, and another acked in between
    async with opened(server.url) as storage:
        await given_topic(storage)
        for id, at in [("again", NOW), ("between", NOW + 1), ("again", NOW + 2)]:
            await storage.forget_tombstones(T, [id])
            assert await storage.insert(T, [msg(id)]) == [ACCEPTED]
            [m] = (await storage.lease(LeaseRequest.of(T, None, at, 1, LEASE, "c"))).delivered
            await storage.ack(T, [(m.id, m.version)], "c", at)
        # When a sweep forgets what was deleted before the second ack
        forgotten = await storage.purge_tombstones(T, NOW + 2, 100)
        # Then it forgot the one in between, and the id's newer tombstone stands
        assert forgotten == 1
        assert await storage.insert(T, [msg("between"), msg("again")]) == [
            ACCEPTED,
            InsertStatus.DUPLICATE,
        ]


def test_max_tombstones_may_be_zero_for_no_bound() -> None:
    assert parse_url("redis://h/0").max_tombstones == 1_000_000
    assert parse_url("redis://h/0?max_tombstones=0").max_tombstones == 0
    with pytest.raises(InvalidArgument):
        parse_url("redis://h/0?max_tombstones=-1")


async def test_a_payload_too_large_to_keep_inline_is_kept_apart_and_read_whole(
    server: RedisServer,
) -> None:
    large, small = b"L" * (redis_record.INLINE_MAX + 1), b"s" * redis_record.INLINE_MAX
    slot = redis_keys.Slot(T, 0, 1)
    async with opened(server.url) as storage:
        # given a topic with a large and a small payload, and one delivered at most once
        await given_topic(storage)
        await storage.insert(T, [msg("big", NOW - 2)._replace(payload=large)])
        await storage.insert(T, [msg("small", NOW + 50)._replace(payload=small)])
        await storage.insert(T, [msg("once", NOW - 1, max_deliveries=1)._replace(payload=large)])
        # then only the large ones are in the payloads hash
        with server.client() as client:
            assert set(client.hkeys(slot.payloads)) == {b"big", b"once"}
        # and a lease reads them whole, and an at-most-once delivery deletes its own
        leases = await storage.lease(LeaseRequest.of(T, None, NOW, 10, LEASE, "c1", 0))
        assert {m.id: m.payload for m in leases.delivered} == {"big": large, "once": large}
        # and a move that rewrites payloads moves them between the record and the hash
        moved = await storage.move(T, "small", 1, NOW + 60, NOW, payload=large)
        assert (await storage.get(T, "small")).payload == large
        await storage.move(T, "small", moved.version, NOW + 70, NOW, payload=b"tiny")
        assert (await storage.get(T, "small")).payload == b"tiny"
        with server.client() as client:
            assert set(client.hkeys(slot.payloads)) == {b"big"}
        # and an ack deletes the last one
        big = next(m for m in leases.delivered if m.id == "big")
        await storage.ack(T, [("big", big.version)], "c1", NOW)
        with server.client() as client:
            assert client.hlen(slot.payloads) == 0
