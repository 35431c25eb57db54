"""Priority topics on sqlite:// beyond the shared contract: a file made before
them is upgraded in place, and promote (one UPDATE) seeks the due index."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from dejaq.core import priority as prio
from dejaq.core.model import KIND_PRIORITY, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.sqlite import sql
from tests.storage_plugins.test_sqlite import NOW, opened, url_of

# The messages table as schema version 2 made it: no priority column.
_VERSION_2_MESSAGES = """CREATE TABLE messages (
    topic TEXT NOT NULL,
    id TEXT NOT NULL,
    bucket INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    version INTEGER NOT NULL,
    deliveries INTEGER NOT NULL,
    owner TEXT,
    max_deliveries INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    dead INTEGER NOT NULL,
    PRIMARY KEY (topic, id)
) WITHOUT ROWID"""


def jobs_topic() -> Topic:
    settings = TopicSettings(buckets=2, kind=KIND_PRIORITY, priorities=10, aging_ms=50)
    return Topic("jobs", settings, created_at_ms=NOW - 10_000)


async def test_a_file_from_before_priorities_is_upgraded_in_place(tmp_path: Path) -> None:
    # Given a version 2 file holding a timeline message
    db = tmp_path / "old.db"
    with closing(sqlite3.connect(db)) as raw:
        raw.execute(_VERSION_2_MESSAGES)
        for statement in sql.SCHEMA:
            raw.execute(statement)
        raw.execute(
            "INSERT INTO topics VALUES ('timeline', ?, 7)",
            ('{"buckets": 4, "lease_ms": 1000}',),
        )
        raw.execute(
            "INSERT INTO messages VALUES ('timeline', 'old', 0, ?, 1, 0, NULL, 0, 0, 0)", (NOW,)
        )
        raw.execute(
            "INSERT INTO payloads (topic, id, payload) VALUES ('timeline', 'old', x'6f6c64')"
        )
        raw.execute("PRAGMA user_version = 2")
        raw.commit()
    # When this version opens it
    async with opened(url_of(db)) as storage:
        # Then the old message reads as priority 0 and is leased as before
        old = await storage.get("timeline", "old")
        assert (old.priority, old.timestamp, old.payload) == (0, NOW, b"old")
        request = LeaseRequest.of("timeline", None, NOW, 10, 1_000, "c1")
        delivered = (await storage.lease(request)).delivered
        assert [(d.id, d.priority) for d in delivered] == [("old", 0)]
        # and a priority topic works in the upgraded file
        jobs = jobs_topic()
        await storage.create_topic(jobs)
        await storage.insert("jobs", [NewMessage("p", NOW - 5, b"", 1, priority=7)])
        assert await storage.promote("jobs", None, NOW, 10) == 1
        assert (await storage.get("jobs", "p")).timestamp == prio.rank(jobs, 7, NOW - 5)
    with closing(sqlite3.connect(db)) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (sql.SCHEMA_VERSION,)
    # and opening it again changes nothing more
    async with opened(url_of(db)) as storage:
        assert (await storage.get("jobs", "p")).priority == 7


async def test_promote_takes_the_oldest_through_the_due_index(tmp_path: Path) -> None:
    db = tmp_path / "dejaq.db"
    async with opened(url_of(db)) as storage:
        jobs = jobs_topic()
        await storage.create_topic(jobs)
        await storage.insert(
            "jobs", [NewMessage(f"m{i}", NOW - i, b"", i % 2, priority=i % 10) for i in range(50)]
        )
        assert await storage.promote("jobs", [0, 1], NOW, 20) == 20
        stamps = {m: (await storage.get("jobs", m)).timestamp for m in ("m49", "m30", "m29")}
        assert stamps["m49"] == prio.rank(jobs, 9, NOW - 49)  # the oldest went first
        assert stamps["m30"] == prio.rank(jobs, 0, NOW - 30)
        assert stamps["m29"] == NOW - 29  # past the limit
    params = {
        "topic": "jobs",
        "now": NOW,
        "buckets": "[0, 1]",
        "limit": 10,
        "step": 50,
        "created_at": 0,
        "base": prio.RANK_BASE,
    }
    with closing(sqlite3.connect(db)) as raw:
        plan = [row[3] for row in raw.execute(f"EXPLAIN QUERY PLAN {sql.PROMOTE}", params)]
    assert any(step.startswith("SEARCH") and "messages_due" in step for step in plan), plan
    assert not any(step.startswith("SCAN messages") for step in plan), plan
