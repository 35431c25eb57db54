"""What only the postgresql:// backend promises for priority topics: a database
made before priorities existed is upgraded in place, and promote, one statement
on the ranking parameters it cached, notices when the topic changed under it."""

from __future__ import annotations

import json
import uuid
from contextlib import AbstractAsyncContextManager

import psycopg
import pytest

from dejaq.core import priority
from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import KIND_PRIORITY, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.postgres import sql
from dejaq.storage_plugins.postgres.storage import PostgresStorage
from tests.postgres_server import PostgresServer
from tests.storage_plugins.opening import opened_as

T = "jobs"
CREATED = 1_700_000_000_000
NOW = CREATED + 60_000
LEASE = 1_000


def opened(url: str) -> AbstractAsyncContextManager[PostgresStorage]:
    return opened_as(PostgresStorage, url)


def priority_topic(aging_ms: int = 0, name: str = T) -> Topic:
    settings = TopicSettings(buckets=4, kind=KIND_PRIORITY, priorities=10, aging_ms=aging_ms)
    return Topic(name, settings, CREATED)


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    """The shared database, emptied."""
    postgres_server.reset()
    return postgres_server.url()


# -- upgrading a database ---------------------------------------------------------


def schema_at(url: str, version: int) -> None:
    """The tables as the first ``version`` migrations made them, as an older dejaq left them."""
    with psycopg.connect(url) as conn:
        conn.execute(sql.CREATE_SCHEMA_TABLE)
        for number, steps in enumerate(sql.MIGRATIONS[:version], start=1):
            for statement in steps:
                conn.execute(statement)
            conn.execute(sql.RECORD_MIGRATION, (number,))


async def test_a_database_without_priorities_is_upgraded_in_place(
    postgres_server: PostgresServer,
) -> None:
    # given a database of schema version 2 holding a timeline message
    url = postgres_server.create_database(f"t_{uuid.uuid4().hex}")
    schema_at(url, 2)
    with psycopg.connect(url) as conn:
        settings = json.dumps({"buckets": 4})
        conn.execute("INSERT INTO dejaq_topics VALUES ('old', %s, 7)", (settings,))
        conn.execute(
            "INSERT INTO dejaq_messages (topic, id, bucket, ts, version, deliveries, owner,"
            " max_deliveries, expires_at, dead) VALUES ('old', 'm', 0, 5, 1, 0, NULL, 0, 0, false)"
        )
        conn.execute("INSERT INTO dejaq_payloads VALUES ('old', 'm', 'body')")
    # when this dejaq opens it
    async with opened(url) as storage:
        # then the message is there with priority 0, and leases as before
        m = await storage.get("old", "m")
        assert (m.timestamp, m.payload, m.priority) == (5, b"body", 0)
        leases = await storage.lease(LeaseRequest.of("old", None, 10, 10, LEASE, "c1"))
        assert [(d.id, d.priority) for d in leases.delivered] == [("m", 0)]
        # and priority topics work on it
        await storage.create_topic(priority_topic())
        await storage.insert(T, [NewMessage("p", NOW, b"", 0, priority=3)])
        assert await storage.promote(T, None, NOW, 10) == 1
        assert (await storage.get(T, "p")).priority == 3
    with psycopg.connect(url) as conn:
        versions = [row[0] for row in conn.execute(f"SELECT version FROM {sql.SCHEMA_TABLE}")]
    assert sorted(versions) == list(range(1, len(sql.MIGRATIONS) + 1))


# -- promote and the topic under it ------------------------------------------------


async def test_promote_ranks_by_the_topic_as_it_is_now(url: str) -> None:
    async with opened(url) as a, opened(url) as b:
        # given broker A has promoted on a topic without aging
        await a.create_topic(priority_topic())
        await a.insert(T, [NewMessage("x", NOW - 5, b"", 0, priority=2)])
        assert await a.promote(T, None, NOW, 10) == 1
        # when broker B deletes it and creates it again, same name and creation
        # time, with aging
        await b.delete_topic(T)
        aged = priority_topic(aging_ms=50)
        await b.create_topic(aged)
        await b.insert(T, [NewMessage("y", NOW - 5, b"", 1, priority=2)])
        # then A ranks by the new step
        assert await a.promote(T, None, NOW, 10) == 1
        assert (await a.get(T, "y")).timestamp == priority.rank(aged, 2, NOW - 5)
        # and when B makes it a timeline, A's promote is refused, not applied
        await b.delete_topic(T)
        await b.create_topic(Topic(T, TopicSettings(buckets=4), CREATED))
        await b.insert(T, [NewMessage("z", NOW - 5, b"", 1)])
        with pytest.raises(InvalidArgument):
            await a.promote(T, None, NOW, 10)
        assert (await a.get(T, "z")).timestamp == NOW - 5
        # and once it is gone, NotFound
        await b.delete_topic(T)
        with pytest.raises(NotFound):
            await a.promote(T, None, NOW, 10)


async def test_promote_goes_on_after_another_broker_changes_a_setting(url: str) -> None:
    async with opened(url) as a, opened(url) as b:
        # given A has promoted once (and keeps the topic's parameters)
        topic = priority_topic(aging_ms=20)
        await a.create_topic(topic)
        await a.insert(T, [NewMessage("x", NOW - 5, b"", 0, priority=1)])
        assert await a.promote(T, None, NOW, 10) == 1
        # when B changes its rate cap
        settings = TopicSettings(
            buckets=4, kind=KIND_PRIORITY, priorities=10, aging_ms=20, max_rate=50.0
        )
        await b.update_topic(Topic(T, settings, CREATED))
        # then A's next promote reads the topic again and ranks as before
        await a.insert(T, [NewMessage("y", NOW - 3, b"", 2, priority=4)])
        assert await a.promote(T, [2], NOW, 10) == 1
        assert (await a.get(T, "y")).timestamp == priority.rank(topic, 4, NOW - 3)


async def test_promote_looks_past_rows_another_transaction_holds(url: str) -> None:
    async with opened(url) as storage:
        # given ten available messages, the three oldest locked by another transaction
        topic = priority_topic()
        await storage.create_topic(topic)
        await storage.insert(T, [NewMessage(f"m{i}", NOW - 10 + i, b"", 0) for i in range(10)])
        async with await psycopg.AsyncConnection.connect(url) as other:
            async with other.transaction():
                await other.execute(
                    "SELECT 1 FROM dejaq_messages WHERE topic = %s AND id = ANY (%s) FOR UPDATE",
                    (T, ["m0", "m1", "m2"]),
                )
                # when a promote of five runs meanwhile
                assert await storage.promote(T, None, NOW, 5) == 5
                # then it ranked the next five oldest, not waiting and not stopping short
                ranked = {
                    f"m{i}" for i in range(10) if (await storage.get(T, f"m{i}")).timestamp < 0
                }
                assert ranked == {f"m{i}" for i in range(3, 8)}
        # and once they are free, the next promote takes the rest
        assert await storage.promote(T, None, NOW, 10) == 5
        for i in range(10):
            assert (await storage.get(T, f"m{i}")).timestamp == priority.rank(
                topic, 0, NOW - 10 + i
            )
