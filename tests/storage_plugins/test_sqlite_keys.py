"""Keys on sqlite:// beyond the shared contract: a file made before keys is
upgraded in place by ``dejaq storage migrate``, and a fair pass seeks each
key's messages through messages_key."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.sqlite import sql
from tests.storage_plugins.test_sqlite import NOW, T, opened, url_of


def as_version_5(db: Path) -> None:
    """Take a file back to the format of version 5, as a dejaq before keys left it."""
    with closing(sqlite3.connect(db)) as raw:
        raw.execute("DROP INDEX messages_key")
        raw.execute("DROP TABLE lanes")
        raw.execute("ALTER TABLE messages DROP COLUMN key")
        raw.execute("ALTER TABLE payloads DROP COLUMN headers")
        raw.execute("PRAGMA user_version = 5")
        raw.commit()


async def test_a_file_from_before_keys_is_migrated_in_place(tmp_path: Path) -> None:
    # given a version 5 file holding a message
    db = tmp_path / "old.db"
    async with opened(url_of(db)) as storage:
        await storage.create_topic(Topic(T, TopicSettings(buckets=2), created_at_ms=7))
        await storage.insert(T, [NewMessage("old", NOW - 1, b"old", 0)])
    as_version_5(db)
    # when migrated, then it is at this version and its message has no key and no headers
    assert await storage_from_url(url_of(db)).migrate() == (5, sql.SCHEMA_VERSION, 0)
    async with opened(url_of(db)) as storage:
        old = await storage.get(T, "old")
        assert (old.payload, old.key, old.headers) == (b"old", "", b"")
        # and keyed messages share a pass with it
        fresh = [NewMessage(f"k{i}", NOW - 5, b"", i % 2, key="k", headers=b"h") for i in range(9)]
        await storage.insert(T, fresh)
        request = LeaseRequest.of(T, None, NOW, 4, 1_000, "c1")
        leased = {(d.id, d.key) for d in (await storage.lease(request)).delivered}
        assert ("old", "") in leased and len(leased) == 4
    # and migrating again changes nothing
    now_at = sql.SCHEMA_VERSION
    assert await storage_from_url(url_of(db)).migrate() == (now_at, now_at, 0)


def test_a_fair_pass_seeks_a_key_through_its_index(tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / "plan.db")) as raw:
        for statement in (*sql.SCHEMA, *sql.KEY_INDEXES):
            raw.execute(statement)
        plan = " ".join(
            row[3]
            for row in raw.execute(f"EXPLAIN QUERY PLAN {sql.KEY_DUE}", (T, "k", NOW, "[0, 1]", 10))
        )
        assert "USING INDEX messages_key (topic=? AND key=? AND bucket=? AND ts<?)" in plan
        lanes = " ".join(
            row[3] for row in raw.execute(f"EXPLAIN QUERY PLAN {sql.DUE_LANES}", (T, "[0]", NOW))
        )
        assert "lanes_due" in lanes
