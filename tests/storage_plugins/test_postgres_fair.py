"""Fair lease passes on ``postgresql://``: what statements a keyed pass runs.

A keyed pass costs its round trips: the pass's first statement returns the
due lanes with their counts, one step takes every key's share when the keys
beside a backlog have few due each, and a lane is set again only once
nothing of it is due."""

from __future__ import annotations

from collections import Counter
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
import pytest

from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.postgres import sql
from dejaq.storage_plugins.postgres.storage import PostgresStorage
from tests.postgres_server import PostgresServer
from tests.storage_plugins.opening import opened_as

T = "fair"
NOW = 1_000_000
NAMES = {v: k for k, v in vars(sql).items() if isinstance(v, str) and k.isupper()}


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    """The shared database, emptied."""
    postgres_server.reset()
    return postgres_server.url()


def opened(url: str) -> AbstractAsyncContextManager[PostgresStorage]:
    return opened_as(PostgresStorage, url)


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names (in ``sql``) of the statements the storage runs from now on."""
    ran: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def named(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        ran.append(NAMES.get(query, "other"))
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", named)
    return ran


def msg(id: str, ts: int, bucket: int, key: str) -> NewMessage:
    return NewMessage(id, ts, b"p", bucket, key=key)


async def a_pass(storage: PostgresStorage, limit: int) -> Counter[str]:
    request = LeaseRequest.of(T, None, NOW, limit, 60_000, "c1")
    return Counter(d.key for d in (await storage.lease(request)).delivered)


async def test_a_keyed_pass_beside_a_backlog_is_one_step(url: str, statements: list[str]) -> None:
    async with opened(url) as storage:
        # given a backlog of one key over 4 buckets and 5 keys with one message due each
        await storage.create_topic(Topic(T, TopicSettings(buckets=4)))
        await storage.insert(T, [msg(f"c{i:03}", NOW - 50, i % 4, "campaign") for i in range(100)])
        await storage.insert(T, [msg(f"r{i}", NOW - i, i % 4, f"r{i}") for i in range(5)])
        statements.clear()
        # when a pass may take 20
        taken = await a_pass(storage, 20)
        # then it takes every share in one step after its first statement, and
        # sets again the lanes of the keys it emptied
        assert taken == Counter({"campaign": 15} | {f"r{i}": 1 for i in range(5)})
        assert statements == ["LEASE_TOPIC", "KEY_LEASE", "LOCK_LANES", "FIX_LANES"]
        # and a pass with the backlog alone due leaves its lanes as they are
        statements.clear()
        assert await a_pass(storage, 20) == Counter({"campaign": 20})
        assert statements == ["LEASE_TOPIC", "KEY_LEASE"]


def _scans(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The index scans of dejaq_messages in an EXPLAIN (ANALYZE, FORMAT JSON) plan."""
    found = [plan] if plan.get("Relation Name") == "dejaq_messages" else []
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


async def test_a_whole_topic_pass_reads_a_key_s_head_in_one_seek(url: str) -> None:
    async with opened(url) as storage:
        # given a backlog of one key over 16 buckets (16 lanes) and 3 keys
        # with one message due each
        await storage.create_topic(Topic(T, TopicSettings(buckets=16)))
        backlog = [msg(f"c{i:03}", NOW - 50, i % 16, "campaign") for i in range(160)]
        await storage.insert(T, backlog)
        await storage.insert(T, [msg(f"r{i}", NOW - i, i, f"r{i}") for i in range(3)])
    # when a pass over the whole topic runs its first statement
    params = {"topic": T, "buckets": None, "now": NOW, "bound": NOW, "window": 20}
    params |= {"limit": 20, "until": NOW + 60_000, "owner": "c1", "max_deliveries": 0}
    with psycopg.connect(url) as conn:
        conn.execute(sql.SESSION_SETUP)
        explain = "EXPLAIN (ANALYZE, FORMAT JSON) " + sql.LEASE_TOPIC
        [[document]] = psycopg.ClientCursor(conn).execute(explain, params).fetchall()
    # then each key's head and count are one seek across its buckets, not a
    # seek a lane; the unkeyed messages' head a seek a bucket
    scans = _scans(document[0]["Plan"])
    by_key = [s for s in scans if s.get("Index Name") == "dejaq_messages_keyed"]
    assert [s["Actual Loops"] for s in by_key] == [4]
    per_bucket = [s for s in scans if s.get("Index Name") == "dejaq_messages_key"]
    assert [s["Actual Loops"] for s in per_bucket] == [16]
