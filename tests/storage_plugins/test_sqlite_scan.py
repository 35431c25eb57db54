"""A sqlite:// scan seeks its page and stops, and runs beside the writer: a
long read never holds up a write or the health probe."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from dejaq.core.model import InsertStatus, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.sqlite import sql
from dejaq.storage_plugins.sqlite.storage import SqliteStorage

T = "timeline"
NOW = 1_000_000
BUCKETS = 64
WAIT_S = 10.0  # a bound on waiting for what must happen, not a speed


def messages(count: int) -> list[NewMessage]:
    return [NewMessage(f"m{i:05d}", NOW + i, b"x" * 100, i % BUCKETS) for i in range(count)]


async def opened(db: Path) -> SqliteStorage:
    storage = storage_from_url(f"sqlite:///{db}")
    assert isinstance(storage, SqliteStorage)
    await storage.open()
    return storage


def plan(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as raw:
        rows = raw.execute(f"EXPLAIN QUERY PLAN {sql.SCAN_BUCKET}", (T, 3, "m00100", 1001))
        return [row[3] for row in rows]


PINNED = [
    "SEARCH m USING INDEX messages_bucket (topic=? AND bucket=? AND id>?)",
    "SEARCH p USING INDEX sqlite_autoindex_payloads_1 (topic=? AND id=?)",
]


@pytest.mark.parametrize("analyzed", [False, True], ids=["no_statistics", "analyzed"])
async def test_a_scan_page_seeks_the_bucket_then_each_payload_by_key(
    tmp_path: Path, analyzed: bool
) -> None:
    # given a topic of 64 buckets, empty or filled and analyzed
    db = tmp_path / "dejaq.db"
    storage = await opened(db)
    try:
        await storage.create_topic(Topic(T, TopicSettings(buckets=BUCKETS), created_at_ms=7))
        if analyzed:
            await storage.insert(T, messages(3000))
    finally:
        await storage.close()
    if analyzed:
        with closing(sqlite3.connect(db)) as raw:
            raw.execute("ANALYZE")
    # then a page seeks the bucket's ids after the cursor, in order (no sort),
    # and finds each row's payload by its key: never the payloads first
    assert plan(db) == PINNED


class ScanGate:
    """Holds every scan statement, on whatever connection runs it, until opened.

    Installed on each connection sqlite3 makes: a trace callback notes which
    statement the connection runs, and a progress handler (called as SQLite
    works) blocks while that statement is a scan and the gate is shut."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.reached = threading.Event()
        self._connect = sqlite3.connect

    def connect(self, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = self._connect(*args, **kwargs)
        running = [""]

        def traced(statement: str) -> None:
            running[0] = statement

        def progress() -> int:
            if "bucket = " in running[0] and "ORDER BY m.id" in running[0]:
                self.reached.set()
                self.open.wait(WAIT_S * 3)
            return 0

        conn.set_trace_callback(traced)
        conn.set_progress_handler(progress, 100)
        return conn


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScanGate]:
    held = ScanGate()
    monkeypatch.setattr(sqlite3, "connect", held.connect)
    try:
        yield held
    finally:
        held.open.set()


async def test_writes_and_the_health_probe_answer_while_a_scan_is_reading(
    tmp_path: Path, gate: ScanGate
) -> None:
    # given a topic with messages in bucket 0
    storage = await opened(tmp_path / "dejaq.db")
    try:
        await storage.create_topic(Topic(T, TopicSettings(buckets=BUCKETS), created_at_ms=7))
        await storage.insert(T, messages(640))
        # when a scan of the bucket is in the middle of its read
        reading = asyncio.create_task(storage.scan(T, 0, "", 1000))
        assert await asyncio.to_thread(gate.reached.wait, WAIT_S), "the scan never started"
        # then the health probe and an insert are answered meanwhile
        try:
            healthy = await asyncio.wait_for(storage.healthy(), WAIT_S)
            inserted = await asyncio.wait_for(
                storage.insert(T, [NewMessage("late", NOW, b"y", 0)]), WAIT_S
            )
        finally:
            gate.open.set()
        assert healthy
        assert inserted == [InsertStatus.ACCEPTED]
        assert not reading.done()
        # and the scan, let go, returns the bucket as it was when the page began
        page = await asyncio.wait_for(reading, WAIT_S)
        assert [m.id for m in page.messages] == [f"m{i:05d}" for i in range(0, 640, BUCKETS)]
        assert page.after_id is None
    finally:
        gate.open.set()
        await storage.close()
