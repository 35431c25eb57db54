"""What only the postgresql:// backend promises: several brokers on one database,
a schema it migrates itself, its URL options, and riding out a server restart."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import psycopg
import pytest

from dejaq.core.errors import InvalidArgument, NotFound, StorageError, StorageUnavailable
from dejaq.core.model import Counts, InsertStatus, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.postgres import sql
from dejaq.storage_plugins.postgres.storage import PostgresStorage
from tests.postgres_server import PostgresServer, bin_dir

T = "timeline"
NOW = 1_000_000
LEASE = 1_000
RECOVERY_DEADLINE_S = 30.0


@asynccontextmanager
async def opened(url: str) -> AsyncIterator[PostgresStorage]:
    storage = storage_from_url(url)
    assert isinstance(storage, PostgresStorage)
    await storage.open()
    try:
        yield storage
    finally:
        await storage.close()


def msg(id: str, ts: int = NOW, bucket: int = 0) -> NewMessage:
    return NewMessage(id, ts, id.encode(), bucket)


async def given_topic(storage: PostgresStorage, buckets: int = 8) -> None:
    await storage.create_topic(Topic(T, TopicSettings(buckets=buckets), created_at_ms=7))


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    """The shared database, emptied."""
    postgres_server.reset()
    return postgres_server.url()


@pytest.fixture
def fresh_url(postgres_server: PostgresServer) -> str:
    """A database of its own, without any dejaq table yet."""
    return postgres_server.create_database(f"t_{uuid.uuid4().hex}")


def applied_migrations(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(f"SELECT version FROM {sql.SCHEMA_TABLE} ORDER BY version")
        return [row[0] for row in rows]


# -- several brokers ------------------------------------------------------------


@pytest.mark.parametrize("buckets", [None, list(range(8))], ids=["whole-topic", "buckets"])
async def test_two_brokers_never_lease_the_same_message(
    url: str, buckets: list[int] | None
) -> None:
    # given two storage instances on one database, as two brokers would have,
    # and 1,000 due messages
    pooled = f"{url}?min_size=2&max_size=6"
    async with opened(pooled) as one, opened(pooled) as two:
        await given_topic(one)
        await one.insert(T, [msg(f"m{i:04d}", NOW - i, bucket=i % 8) for i in range(1000)])
        # when both lease at once, six consumers each
        results = await asyncio.gather(
            *(
                storage.lease(LeaseRequest.of(T, buckets, NOW, 100, LEASE, f"c{k}", 0))
                for k in range(6)
                for storage in (one, two)
            )
        )
    # then each message went to exactly one consumer, and none was left behind
    taken = [d.id for leases in results for d in leases.delivered]
    assert len(taken) == len(set(taken)) == 1000


# -- schema ---------------------------------------------------------------------


async def test_opening_again_migrates_nothing_and_keeps_the_data(fresh_url: str) -> None:
    async with opened(fresh_url) as storage:
        await given_topic(storage)
        await storage.insert(T, [msg("m")])
    async with opened(fresh_url) as storage:
        assert (await storage.get(T, "m")).payload == b"m"
    assert applied_migrations(fresh_url) == list(range(1, len(sql.MIGRATIONS) + 1))


async def test_brokers_starting_together_migrate_once(fresh_url: str) -> None:
    # given four brokers opening an empty database at the same moment
    storages = [storage_from_url(fresh_url) for _ in range(4)]
    try:
        await asyncio.gather(*(s.open() for s in storages))
        # then every one works on the one schema, applied once
        await storages[0].create_topic(Topic(T))
        assert [t.name for t in await storages[3].list_topics()] == [T]
    finally:
        await asyncio.gather(*(s.close() for s in storages))
    assert applied_migrations(fresh_url) == list(range(1, len(sql.MIGRATIONS) + 1))


async def test_a_schema_from_a_newer_version_is_refused(fresh_url: str) -> None:
    async with opened(fresh_url):
        pass
    with psycopg.connect(fresh_url) as conn:
        conn.execute(sql.RECORD_MIGRATION, (len(sql.MIGRATIONS) + 1,))
    with pytest.raises(StorageError, match="newer"):
        await storage_from_url(fresh_url).open()


# -- URL options ----------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "pool=3",
        "min_size=0",
        "min_size=many",
        "min_size=4&max_size=2",
        "pool_timeout=-1",
        "connect_timeout=0",
        "synchronous_commit=sometimes",
    ],
)
def test_a_bad_url_is_refused_when_the_backend_is_built(query: str) -> None:
    with pytest.raises(InvalidArgument):
        storage_from_url(f"postgresql://dejaq@localhost/dejaq?{query}")


SETTINGS = "SELECT current_setting('synchronous_commit'), current_setting('application_name')"


async def test_url_options_reach_every_session(url: str) -> None:
    query = "min_size=2&max_size=3&synchronous_commit=remote_apply&application_name=dejaq-test"
    async with opened(f"{url}?{query}") as storage:
        for _ in range(3):  # whichever pooled connection answers
            async with storage._connection() as conn:
                cur = await conn.execute(SETTINGS)
                assert await cur.fetchone() == ("remote_apply", "dejaq-test")


# -- failures -------------------------------------------------------------------


async def test_a_failing_batch_stores_nothing(url: str) -> None:
    async with opened(url) as storage:
        await given_topic(storage)
        # given a batch whose last id is too large for the index
        huge = os.urandom(12_000).hex()
        with pytest.raises(StorageError) as raised:
            await storage.insert(T, [msg("good"), msg(huge)])
        # then it is a storage error, not a lost connection, and the batch left nothing
        assert not isinstance(raised.value, StorageUnavailable)
        assert isinstance(raised.value.__cause__, psycopg.Error)
        with pytest.raises(NotFound):
            await storage.get(T, "good")
        assert await storage.counts(T, NOW) == Counts()


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of the test's own, to stop and start."""
    server = PostgresServer.create(bin_dir())
    try:
        server.start()
        server.create_database("dejaq")
        yield server
    finally:
        server.destroy()


async def test_a_stopped_server_is_unavailable_then_recovers(own_server: PostgresServer) -> None:
    url = own_server.url() + "?min_size=2&max_size=4&pool_timeout=1&connect_timeout=1"
    async with opened(url) as storage:
        await given_topic(storage)
        assert await storage.insert(T, [msg("before")]) == [InsertStatus.ACCEPTED]
        # when the server stops
        own_server.stop()
        # then calls fail fast as unavailable, whatever connection they get
        async with asyncio.timeout(10):
            for _ in range(4):
                with pytest.raises(StorageUnavailable):
                    await storage.insert(T, [msg("during")])
            assert not await storage.healthy()
        # and once it is back (same port, same data) the storage recovers by itself
        own_server.start()
        deadline = time.monotonic() + RECOVERY_DEADLINE_S
        while not await storage.healthy():
            assert time.monotonic() < deadline, "no recovery after the restart"
            await asyncio.sleep(0.05)  # polling a condition under a deadline
        assert await storage.insert(T, [msg("after")]) == [InsertStatus.ACCEPTED]
        assert [
            d.id
            for d in (
                await storage.lease(LeaseRequest.of(T, None, NOW, 10, LEASE, "c", 0))
            ).delivered
        ] == [
            "before",
            "after",
        ]


async def test_an_unreachable_server_fails_open_as_unavailable(own_server: PostgresServer) -> None:
    own_server.stop()
    with pytest.raises(StorageUnavailable):
        await storage_from_url(own_server.url() + "?connect_timeout=1").open()


async def test_a_closed_storage_is_unavailable(url: str) -> None:
    storage = storage_from_url(url)
    await storage.open()
    assert await storage.healthy()
    await storage.close()
    assert not await storage.healthy()
    with pytest.raises(StorageUnavailable):
        await storage.list_topics()


# -- plans ----------------------------------------------------------------------

HOT = {
    "claim_due": (sql.CLAIM_DUE, {"topic": T, "now": NOW, "limit": 100}, "dejaq_messages_time"),
    "due_in_buckets": (
        sql.DUE_IN_BUCKETS,
        {"topic": T, "buckets": [1, 2], "now": NOW, "window": 100, "seen": []},
        "dejaq_messages_due",
    ),
    "claim_ids": (
        sql.CLAIM_IDS,
        {"topic": T, "ids": ["m1", "m2"], "now": NOW, "limit": 100},
        "dejaq_messages_pkey",
    ),
    "next_due": (sql.NEXT_DUE, {"topic": T}, "dejaq_messages_time"),
    "next_due_in_buckets": (
        sql.NEXT_DUE_IN_BUCKETS,
        {"topic": T, "buckets": [1, 2]},
        "dejaq_messages_due",
    ),
    "lock_states": (sql.LOCK_STATES, {"topic": T, "ids": ["m1", "m2"]}, "dejaq_messages_pkey"),
    "list_dead": (
        sql.LIST_DEAD,
        {"topic": T, "after_id": "", "limit": 10},
        "dejaq_messages_dead",
    ),
    "release": (
        sql.RELEASE_OWNER,
        {"topic": T, "owner": "c1", "now": NOW},
        "dejaq_messages_owner",
    ),
}


def _nodes(plan: dict[str, object]) -> Iterator[dict[str, object]]:
    yield plan
    for child in plan.get("Plans", []):  # type: ignore[attr-defined]
        yield from _nodes(child)


@pytest.fixture(scope="module")
def burst_url(postgres_server: PostgresServer) -> str:
    """A database of its own holding a topic with 20,000 messages, all due (the
    campaign burst), and no planner statistics yet (as right after a burst)."""
    url = postgres_server.create_database(f"t_{uuid.uuid4().hex}")

    async def load() -> None:
        async with opened(url) as storage:
            await given_topic(storage, buckets=64)
            for start in range(0, 20_000, 5_000):
                ids = range(start, start + 5_000)
                await storage.insert(T, [msg(f"m{i}", NOW - i, bucket=i % 64) for i in ids])

    asyncio.run(load())
    return url


@pytest.mark.parametrize("name", list(HOT))
def test_hot_statements_search_their_index(burst_url: str, name: str) -> None:
    statement, params, index = HOT[name]
    with psycopg.connect(burst_url) as conn:
        conn.execute(sql.SESSION_SETUP)  # as the backend's sessions run
        [[document]] = conn.execute(f"EXPLAIN (FORMAT JSON) {statement}", params).fetchall()
    plan = (document if isinstance(document, list) else json.loads(document))[0]["Plan"]
    nodes = list(_nodes(plan))
    assert any(node.get("Index Name") == index for node in nodes), plan
    assert not any(node["Node Type"] == "Seq Scan" for node in nodes), plan
