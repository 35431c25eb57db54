"""Every topic's counts (and oldest message, and a priority topic's head) in
one statement, on a reader connection of its own.

The broker's gauges ask for this every few seconds. Asked topic by topic
through the writer (``ops.counts``), 10,000 topics would queue 20,000 jobs
ahead of every lease and insert; a large topic's count would hold the write
thread for as long as it scans. Here one ``GROUP BY`` reads the metadata once,
on a read-only connection run in a worker thread: in WAL mode a reader never
blocks the writer, and sqlite3 lets go of the GIL while SQLite works.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from dejaq.core.model import Counts
from dejaq.storage_plugins.base import Head, TopicCensus
from dejaq.storage_plugins.sqlite import sql


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
            empty = Counts(0, 0, 0, 0)
            conn.execute(sql.BEGIN_READ)  # topics and counts from one snapshot
            try:
                out = {
                    name: TopicCensus(buckets, empty, None)
                    for name, buckets in conn.execute(sql.TOPIC_NAMES)
                }
                for name, dead, due, leased, waiting, ranked, unranked in conn.execute(
                    sql.CENSUS, (now,)
                ):
                    if name in out:
                        counts = Counts(waiting, due, leased, dead)
                        out[name] = _entry(out[name].buckets, counts, ranked, unranked, now)
            finally:
                conn.execute(sql.COMMIT)
            return out

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
    buckets: int, counts: Counts, ranked: int | None, unranked: int | None, now: int
) -> TopicCensus:
    """A census row: ``ranked`` is the packed lowest rank (sql.CENSUS), if
    any; ``unranked`` the oldest live timestamp that is not a rank."""
    if ranked is None:
        return TopicCensus(buckets, counts, unranked)
    rank, priority = divmod(ranked, sql.PRIORITY_SPAN)
    return TopicCensus(buckets, counts, rank, Head.at(priority, unranked, now))
