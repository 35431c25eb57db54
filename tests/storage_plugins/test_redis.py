"""What only the redis:// backend promises: Redis Cluster slotting, scripts that
survive the server forgetting them, WAIT for replicas, failing fast (never
hanging) when the server dies or stalls, and topic caches that cannot go stale."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from redis.crc import key_slot

from dejaq.core.buckets import bucket_of
from dejaq.core.errors import InvalidArgument, NotFound, StorageUnavailable
from dejaq.core.model import Counts, InsertStatus, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis import scripts as redis_scripts
from dejaq.storage_plugins.redis.storage import RedisStorage, parse_url
from tests.redis_server import RedisServer
from tests.servers import require_binary

T = "timeline"
NOW = 1_000_000
LEASE = 1_000
HANG_GUARD_S = 5.0  # a call that fails must fail well within this
ACCEPTED = InsertStatus.ACCEPTED


def msg(id: str, ts: int = NOW, buckets: int = 8, **kw: int) -> NewMessage:
    """A message in the bucket the broker would give it."""
    return NewMessage(id, ts, id.encode(), bucket_of(id, buckets), **kw)


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[RedisStorage]:
    storage = storage_from_url(url)
    assert isinstance(storage, RedisStorage)
    await storage.open()
    try:
        yield storage
    finally:
        await storage.close()


@pytest.fixture
def server(redis_server: RedisServer) -> RedisServer:
    """The session's server, emptied."""
    redis_server.flush()
    return redis_server


@pytest.fixture
def own_server() -> Iterator[RedisServer]:
    """A server of this test alone, which it may kill."""
    root = Path(tempfile.mkdtemp(prefix="dejaq-redis-own-"))
    server = RedisServer(require_binary("redis-server"), root)
    server.start()
    try:
        yield server
    finally:
        server.kill()


async def given_topic(storage: RedisStorage, buckets: int = 8) -> None:
    await storage.create_topic(Topic(T, TopicSettings(buckets=buckets, lease_ms=LEASE)))


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


async def test_every_key_of_a_bucket_is_in_that_buckets_cluster_slot(server: RedisServer) -> None:
    # given messages in every state: waiting, leased, dead
    async with opened(server.url) as storage:
        await given_topic(storage, buckets=8)
        ids = [f"m{i}" for i in range(200)]
        await storage.insert(T, [msg(i, NOW + 1) for i in ids[:2]])  # waiting
        await storage.insert(T, [msg("dies", NOW - 1, expires_at=1), *map(msg, ids[2:])])
        leases = await storage.lease(LeaseRequest.of(T, None, NOW, 50, LEASE, "c1", 0))
        assert (len(leases.delivered), leases.dead_lettered) == (50, 1)
    # when every key is listed
    with server.client() as client:
        names = [k.decode() for k in client.keys(f"{redis_keys.NAMESPACE}:*")]
    # then each key but the registry carries the hash tag of one bucket of the topic
    slots = {f"{{{T}:{b}}}": key_slot(f"{T}:{b}".encode()) for b in range(8)}
    tagged = [k for k in names if k != redis_keys.TOPICS]
    assert {k[k.index("{") : k.index("}") + 1] for k in tagged} == set(slots)
    assert all(key_slot(k.encode()) == slots[k[k.index("{") : k.index("}") + 1]] for k in tagged)
    # and a message's record and payload are in the slot of its bucket
    for id in ids:
        slot = redis_keys.Slot(T, bucket_of(id, 8))
        assert {slot.record(id), slot.payload(id)} <= set(names)
    assert redis_keys.Slot(T, bucket_of("dies", 8)).dead in names


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
    own_server: RedisServer,
) -> None:
    async with opened(f"{own_server.url}?socket_timeout_ms=1000") as storage:
        await given_topic(storage)
        await storage.insert(T, [msg("a")])
        # when the server is killed
        own_server.kill()
        # then calls fail at once with StorageUnavailable, not hang
        async with asyncio.timeout(HANG_GUARD_S):
            with pytest.raises(StorageUnavailable):
                await storage.insert(T, [msg("b")])
            with pytest.raises(StorageUnavailable):
                await storage.lease(LeaseRequest.of(T, None, NOW, 10, LEASE, "c1", 0))
            assert not await storage.healthy()
        # when it is back on the same port (empty: it kept nothing)
        own_server.start()
        # then the first call already reconnects (the pool drops dead connections)
        assert await storage.healthy()
        # and the topic this instance had cached is found gone; a new one works
        with pytest.raises(NotFound):
            await storage.insert(T, [msg("b")])
        await given_topic(storage)
        assert await storage.insert(T, [msg("b")]) == [ACCEPTED]
        assert await storage.counts(T, NOW) == Counts(due=1)


async def test_a_stalled_server_times_out(own_server: RedisServer) -> None:
    async with opened(f"{own_server.url}?socket_timeout_ms=200") as storage:
        await given_topic(storage)
        assert own_server.process is not None
        os.kill(own_server.process.pid, signal.SIGSTOP)
        try:
            async with asyncio.timeout(HANG_GUARD_S):
                with pytest.raises(StorageUnavailable):
                    await storage.counts(T, NOW)
        finally:
            os.kill(own_server.process.pid, signal.SIGCONT)


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


# -- lease across buckets -------------------------------------------------------


@pytest.mark.parametrize("strays", [False, True], ids=["hashed", "strays"])
async def test_a_lease_over_many_buckets_takes_exactly_the_earliest(
    server: RedisServer, strays: bool
) -> None:
    # given 3,000 due messages with distinct random timestamps over 64 buckets
    rng = random.Random(7)
    stamps = rng.sample(range(NOW - 100_000, NOW + 1), 3000)
    messages = [
        NewMessage(f"m{i}", ts, b"", rng.randrange(64) if strays else bucket_of(f"m{i}", 64))
        for i, ts in enumerate(stamps)
    ]
    expected = [m.id for m in sorted(messages, key=lambda m: m.timestamp)]
    async with opened(server.url) as storage:
        await given_topic(storage, buckets=64)
        for start in range(0, len(messages), 1000):
            await storage.insert(T, messages[start : start + 1000])
        # when it is leased in batches of random sizes
        got: list[str] = []
        while len(got) < len(expected):
            limit = rng.choice([1, 7, 100, 450, 1000])
            leases = await storage.lease(LeaseRequest.of(T, None, NOW, limit, LEASE, "c1", 0))
            assert 0 < len(leases.delivered) <= limit
            got += [d.id for d in leases.delivered]
            # then each batch is the next earliest, in order
            assert got == expected[: len(got)]
        assert await storage.next_due(T, None) == NOW + LEASE
