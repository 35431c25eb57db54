"""Counts on sqlite:// beyond the shared contract: each topic's live and dead
messages are kept counted in ``topic_counts``, and a file made before it is
counted when this version first opens it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

from dejaq.core.model import Counts, NewMessage, Topic, TopicSettings
from tests.storage_plugins.test_sqlite import NOW, opened, url_of


def stored_counts(db: Path) -> dict[str, tuple[int, int]]:
    with closing(sqlite3.connect(db)) as raw:
        rows = raw.execute("SELECT topic, live, dead FROM topic_counts").fetchall()
    return {topic: (live, dead) for topic, live, dead in rows}


async def test_a_file_from_before_the_counts_is_counted_when_opened(tmp_path: Path) -> None:
    # Given a file holding live and dead messages, as a version 3 dejaq left it
    db = tmp_path / "old.db"
    async with opened(url_of(db)) as storage:
        await storage.create_topic(Topic("t", TopicSettings(buckets=2), 1))
        await storage.insert(
            "t", [NewMessage(f"m{i}", NOW + 1000 * i, b"", i % 2) for i in range(5)]
        )
    with closing(sqlite3.connect(db)) as raw:
        raw.execute("DROP TABLE topic_counts")
        raw.execute("UPDATE messages SET dead = 1 WHERE id IN ('m0', 'm1')")
        raw.execute("PRAGMA user_version = 3")
        raw.commit()
    # When this version opens it
    async with opened(url_of(db)) as storage:
        # Then its messages are counted, and counted on as they change
        assert stored_counts(db) == {"t": (3, 2)}
        assert await storage.counts("t", NOW) == Counts(waiting=3, dead=2)
        await storage.insert("t", [NewMessage("new", NOW - 1, b"", 0)])
        assert await storage.counts("t", NOW) == Counts(waiting=3, due=1, dead=2)
    # and opening it again counts nothing twice
    async with opened(url_of(db)):
        assert stored_counts(db) == {"t": (4, 2)}
