"""Paging through one bucket by id (``Storage.scan``) on read connections of
its own.

A scan reads a whole topic a page at a time, for as long as the reader
wants. Run by the writer thread, each page would wait for the commits queued
ahead of it and hold up every lease, insert and health probe queued behind.
So pages run here instead: on read-only connections, in threads of their own.
In WAL mode a reader never blocks the writer, nor the writer a reader, and
sqlite3 lets go of the GIL while SQLite works. Each page is one read
transaction (the topic check and the rows from one snapshot), and each is
bounded by its ``LIMIT``: a page seeks and stops (``sql.SCAN_BUCKET``), so a
whole topic reads in time linear in its size.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from dejaq.core.errors import NotFound, StorageUnavailable
from dejaq.storage_plugins import sql_base as base
from dejaq.storage_plugins.base import ScanPage
from dejaq.storage_plugins.sqlite import sql

# Pages read at once; more wait for a thread. Each holds a connection.
READERS = 4


def scan(conn: sqlite3.Connection, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
    conn.execute(sql.BEGIN_READ)  # the topic and its rows from one snapshot
    try:
        if conn.execute(sql.TOPIC_BUCKETS, (topic,)).fetchone() is None:
            raise NotFound(f"topic {topic!r} does not exist")
        rows = conn.execute(sql.SCAN_BUCKET, (topic, bucket, after_id, limit + 1)).fetchall()
    finally:
        conn.execute(sql.COMMIT)
    return ScanPage.of([base.message_from_row(row) for row in rows], limit)


class ScanReader:
    """Up to ``READERS`` read-only connections, each used by one thread at a time."""

    def __init__(self, path: Path, busy_timeout_ms: int, readers: int = READERS) -> None:
        self._uri = f"{path.resolve().as_uri()}?mode=ro"
        self._timeout_s = busy_timeout_ms / 1000
        self._threads = ThreadPoolExecutor(readers, thread_name_prefix=f"dejaq-scan {path}")
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    async def scan(self, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
        if self._closed:
            raise StorageUnavailable("sqlite storage is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, self._page, topic, bucket, after_id, limit)

    def _page(self, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
        conn = self._take()
        try:
            return scan(conn, topic, bucket, after_id, limit)
        finally:
            self._give_back(conn)

    def _take(self) -> sqlite3.Connection:
        with self._lock:
            if self._closed:
                raise StorageUnavailable("sqlite storage is closed")
            if self._idle:
                return self._idle.pop()
        return sqlite3.connect(
            self._uri,
            uri=True,
            timeout=self._timeout_s,
            isolation_level=None,  # transactions are explicit (scan's BEGIN)
            check_same_thread=False,  # kept for whichever reader thread runs next
        )

    def _give_back(self, conn: sqlite3.Connection) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        """Blocking: waits for the pages being read, then closes the connections."""
        with self._lock:
            self._closed = True
        self._threads.shutdown(wait=True)
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
