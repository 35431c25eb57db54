"""A deleted SQLite topic goes at once; its rows are removed after it, a chunk
a writer job, so the writer keeps serving the other topics meanwhile."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from dejaq.core.errors import NotFound
from dejaq.core.model import Counts
from dejaq.storage_plugins.sqlite.storage import SqliteStorage
from tests.storage_plugins.conformance.givens import ACCEPTED, NOW, given_topic, msg

pytestmark = pytest.mark.timeout(120)

BIG = 20_000
CHUNK = 100  # BIG / CHUNK writer jobs to remove the big topic
DEADLINE_S = 60.0


def rows_left(db: Path, topic: str) -> int:
    """The topic's rows in every table, read on a connection of its own."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return sum(
            conn.execute(f"SELECT count(*) FROM {table} WHERE topic = ?", (topic,)).fetchone()[0]
            for table in ("messages", "payloads", "tombstones")
        )


async def until_gone(db: Path, topic: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while rows_left(db, topic):
        assert time.monotonic() < deadline, f"{topic}'s rows were not removed"
        await asyncio.sleep(0.05)


async def opened(db: Path) -> SqliteStorage:
    storage = SqliteStorage(f"sqlite:///{db}")
    storage.purge_chunk = CHUNK
    await storage.open()
    return storage


@pytest.fixture
async def big(tmp_path: Path) -> AsyncIterator[SqliteStorage]:
    """A storage holding topic "big" of BIG messages and an empty "small"."""
    storage = await opened(tmp_path / "d.db")
    await given_topic(storage, "big")
    await given_topic(storage, "small")
    for start in range(0, BIG, 1000):
        await storage.insert("big", [msg(f"m{i}") for i in range(start, start + 1000)])
    yield storage
    await storage.close()


async def test_another_topics_produce_completes_while_a_large_topic_is_removed(
    big: SqliteStorage, tmp_path: Path
) -> None:
    db = tmp_path / "d.db"
    # When the big topic is deleted and another topic produces right after
    await big.delete_topic("big")
    assert await big.insert("small", [msg("a")]) == [ACCEPTED]
    # Then the produce did not wait for the big topic's rows to be removed
    assert rows_left(db, "big") > 0
    # and the big topic was gone for every call at once
    with pytest.raises(NotFound):
        await big.get("big", "m0")
    assert await big.release("big", "anyone", NOW) == 0
    assert "big" not in await big.census(NOW)
    # and its rows are all removed in the end.
    await until_gone(db, "big")
    assert (await big.get("small", "a")).payload == b"a"


async def test_a_name_created_again_starts_empty(big: SqliteStorage, tmp_path: Path) -> None:
    # When the big topic is deleted and created again at once
    await big.delete_topic("big")
    await given_topic(big, "big")
    # Then the new topic holds none of the old one's messages
    assert rows_left(tmp_path / "d.db", "big") == 0
    assert await big.counts("big", NOW) == Counts()
    assert await big.insert("big", [msg("m0"), msg("m1")]) == [ACCEPTED, ACCEPTED]


async def test_a_removal_stopped_by_a_restart_goes_on_after_it(
    big: SqliteStorage, tmp_path: Path
) -> None:
    db = tmp_path / "d.db"
    # Given a broker stopped just after deleting the big topic
    await big.delete_topic("big")
    await big.close()
    assert rows_left(db, "big") > 0
    # When the file is opened again
    again = await opened(db)
    try:
        # Then the rows left are removed.
        await until_gone(db, "big")
    finally:
        await again.close()
