"""Every topic's counts (and oldest message, and a priority topic's head),
on a reader connection of its own.

The broker's gauges ask for this every few seconds. Asked topic by topic
through the writer (``ops.counts``), 10,000 topics would queue 20,000 jobs
ahead of every lease and insert; a large topic's count would hold the write
thread for as long as it reads. Here the topics are read on a read-only
connection run in a worker thread: in WAL mode a reader never blocks the
writer, and sqlite3 lets go of the GIL while SQLite works. Each topic costs a
few index reads (``counting``), however many messages it holds.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from dejaq.storage_plugins.base import Head, TopicCensus
from dejaq.storage_plugins.sqlite import sql
from dejaq.storage_plugins.sqlite.counting import all_buckets, counted


class CensusReader:
    """A read-only connection for the census; one query at a time."""

    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        self._path = path
        self._timeout_s = busy_timeout_ms / 1000
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def census(self, now: int) -> dict[str, TopicCensus]:
        """Blocking: run it in a worker thread."""
        with self._lock:
            conn = self._connect()
            conn.execute(sql.BEGIN_READ)  # topics and counts from one snapshot
            try:
                return {
                    name: _entry(conn, name, buckets, live, dead, now)
                    for name, buckets, live, dead in conn.execute(sql.TOPIC_NAMES).fetchall()
                }
            finally:
                conn.execute(sql.COMMIT)

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite3.connect(
                f"{self._path.resolve().as_uri()}?mode=ro",
                uri=True,
                timeout=self._timeout_s,
                isolation_level=None,
                check_same_thread=False,  # used by one worker thread at a time (the lock)
            )
        return self._conn

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


def _entry(
    conn: sqlite3.Connection, topic: str, buckets: int, live: int, dead: int, now: int
) -> TopicCensus:
    """A topic's census from its live and dead counts: a few index reads."""
    every = all_buckets(buckets)
    counts = counted(conn, topic, every, live, dead, now)
    oldest = conn.execute(sql.OLDEST, (topic, every)).fetchone()
    if oldest is None or oldest[0] >= 0:
        return TopicCensus(buckets, counts, None if oldest is None else oldest[0])
    rank, priority = oldest
    unranked = conn.execute(sql.OLDEST_UNRANKED, (topic, every)).fetchone()
    return TopicCensus(
        buckets, counts, rank, Head.at(priority, None if unranked is None else unranked[0], now)
    )
