"""What only the sqlite:// backend promises: a file that outlives the process,
several brokers on one file, group commit, and its URL options."""

from __future__ import annotations

import asyncio
import sqlite3
from contextlib import AbstractAsyncContextManager, closing
from pathlib import Path
from typing import cast

import pytest

from dejaq.core.errors import InvalidArgument, NotFound, StorageError, StorageUnavailable
from dejaq.core.model import Counts, InsertStatus, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.sqlite import sql
from dejaq.storage_plugins.sqlite.storage import SqliteStorage
from tests.storage_plugins.opening import opened_as

T = "timeline"
NOW = 1_000_000
LEASE = 1_000


def url_of(path: Path, query: str = "") -> str:
    return f"sqlite:///{path}" + (f"?{query}" if query else "")


def opened(url: str) -> AbstractAsyncContextManager[SqliteStorage]:
    return opened_as(SqliteStorage, url)


def msg(id: str, ts: int = NOW, bucket: int = 0, expires_at: int = 0) -> NewMessage:
    return NewMessage(id, ts, id.encode(), bucket, expires_at=expires_at)


async def given_topic(storage: SqliteStorage, buckets: int = 4) -> Topic:
    topic = Topic(T, TopicSettings(buckets=buckets), created_at_ms=7)
    await storage.create_topic(topic)
    return topic


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "data" / "dejaq.db"


async def test_data_survives_close_and_reopen(db: Path) -> None:
    # given a topic with a waiting, a leased and a dead message, then a shutdown
    async with opened(url_of(db)) as storage:
        topic = await given_topic(storage)
        await storage.insert(T, [msg("leased"), msg("dead", expires_at=1), msg("waiting", NOW + 9)])
        await storage.lease(LeaseRequest.of(T, None, NOW, 10, LEASE, "c1", 0))
        before = [await storage.get(T, id) for id in ("leased", "dead", "waiting")]
    # when the file is opened again
    async with opened(url_of(db)) as storage:
        # then everything is as it was
        assert await storage.list_topics() == [topic]
        assert [await storage.get(T, id) for id in ("leased", "dead", "waiting")] == before
        assert await storage.counts(T, NOW) == Counts(waiting=1, leased=1, dead=1)


async def test_a_relative_path_is_under_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with opened("sqlite:///nested/dir/rel.db?synchronous=full&busy_timeout_ms=100"):
        pass
    assert (tmp_path / "nested" / "dir" / "rel.db").is_file()


@pytest.mark.parametrize(
    "url",
    [
        "sqlite://host/x.db",
        "sqlite:///",
        "sqlite:///:memory:",
        "sqlite:///x.db?synchronous=sometimes",
        "sqlite:///x.db?busy_timeout_ms=-1",
        "sqlite:///x.db?journal=off",
    ],
)
def test_a_bad_url_is_refused_when_the_backend_is_built(url: str) -> None:
    with pytest.raises(InvalidArgument):
        storage_from_url(url)


async def test_the_file_is_in_wal_mode_with_a_schema_version(db: Path) -> None:
    async with opened(url_of(db)):
        with closing(sqlite3.connect(db)) as raw:
            assert raw.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert raw.execute("PRAGMA user_version").fetchone() == (sql.SCHEMA_VERSION,)


async def test_a_file_from_a_newer_version_is_refused(db: Path) -> None:
    db.parent.mkdir(parents=True)
    with closing(sqlite3.connect(db)) as raw:
        raw.execute(f"PRAGMA user_version = {sql.SCHEMA_VERSION + 1}")
    storage = storage_from_url(url_of(db))
    with pytest.raises(StorageError, match="newer"):
        await storage.open()
    # and a migrate refuses it too, naming the version, and leaves it as it was
    with pytest.raises(StorageError, match=f"stored format version {sql.SCHEMA_VERSION + 1}"):
        await storage_from_url(url_of(db)).migrate()
    with closing(sqlite3.connect(db)) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (sql.SCHEMA_VERSION + 1,)


async def test_migrate_refuses_a_missing_file_and_makes_nothing(db: Path) -> None:
    # given no file (a mistyped path), when migrated, then it is refused by path
    with pytest.raises(StorageError, match=f"no store at {db}: nothing to migrate"):
        await storage_from_url(url_of(db)).migrate()
    # and neither the file nor its folder was made
    assert not db.parent.exists()


async def test_migrate_marks_an_empty_file_and_upgrades_an_older_one(db: Path) -> None:
    # given an empty file, when migrated, then it is marked with this format version
    db.parent.mkdir(parents=True)
    sqlite3.connect(db).close()
    assert await storage_from_url(url_of(db)).migrate() == (None, sql.SCHEMA_VERSION, 0)
    # given a file of an older format (before the priority column), with a message
    async with opened(url_of(db)) as storage:
        await storage.create_topic(Topic(T))
        await storage.insert(T, [NewMessage("a", 5, b"x", 0)])
    with closing(sqlite3.connect(db)) as raw:
        raw.execute("ALTER TABLE messages DROP COLUMN priority")
        raw.execute("PRAGMA user_version = 2")
    # when migrated, then it is at this version, and the message is kept
    assert await storage_from_url(url_of(db)).migrate() == (2, sql.SCHEMA_VERSION, 0)
    async with opened(url_of(db)) as storage:
        assert (await storage.get(T, "a")).payload == b"x"
    assert await storage_from_url(url_of(db)).migrate() == (
        sql.SCHEMA_VERSION,
        sql.SCHEMA_VERSION,
        0,
    )


async def test_concurrent_calls_share_commits(db: Path) -> None:
    async with opened(url_of(db)) as storage:
        await given_topic(storage)
        before = storage.transactions
        # when 500 producers insert one message each at once
        statuses = await asyncio.gather(
            *(storage.insert(T, [msg(f"m{i}", NOW + 1)]) for i in range(500))
        )
        # then all are stored, in fewer transactions than calls
        assert statuses == [[InsertStatus.ACCEPTED]] * 500
        assert await storage.counts(T, NOW) == Counts(waiting=500)
        assert storage.transactions - before < 500


def wal_frames(db: Path) -> int:
    """The length of the WAL in pages, as a checkpoint reports it."""
    with closing(sqlite3.connect(db)) as raw:
        _, frames, _ = raw.execute(sql.CHECKPOINT).fetchone()
    return int(frames)


async def test_the_wal_is_checkpointed_beside_the_writer_and_stays_short(db: Path) -> None:
    async with opened(url_of(db)) as storage:
        await given_topic(storage)
        assert storage._checkpointer is not None
        storage._checkpointer.every = 40  # every few calls, so 400 calls cross it often
        # when 400 calls commit one after the other (the writer's connection
        # never checkpoints by itself)
        checkpointer = storage._checkpointer
        for i in range(400):
            await storage.insert(T, [msg(f"m{i}-{k}", NOW + 1) for k in range(10)])
            if i % 20 == 19:  # a loaded machine may run the thread late: let it catch up
                seen = checkpointer.checkpoints
                for _ in range(2_000):  # 10 s at most
                    if checkpointer.checkpoints != seen:
                        break
                    await asyncio.sleep(0.005)
        # then the WAL was checkpointed along the way and restarts from its start
        # at the next commit after a checkpoint that caught up with the writer,
        # not left to grow (400 commits write well over 1,000 pages). A
        # checkpoint that ran while a commit was being written could not finish,
        # so the last one may have left a tail: the next commits restart it.
        assert checkpointer.checkpoints > 0
        frames, tail = wal_frames(db), 0
        while frames >= 400 and tail < 100:
            await storage.insert(T, [msg(f"tail{tail}", NOW + 1)])
            tail += 1
            frames = wal_frames(db)
        assert frames < 400
        assert await storage.counts(T, NOW) == Counts(waiting=4000 + tail)


async def test_a_failing_call_rolls_back_only_itself(db: Path) -> None:
    async with opened(url_of(db)) as storage:
        await given_topic(storage)
        # given a batch whose last payload cannot be stored, among good calls
        bad = [msg("bad-1"), NewMessage("bad-2", NOW, cast(bytes, object()), 0)]
        good, failed, unknown = await asyncio.gather(
            storage.insert(T, [msg("good")]),
            storage.insert(T, bad),
            storage.insert("nowhere", [msg("x")]),
            return_exceptions=True,
        )
        # then each call has its own outcome and the failed batch stored nothing
        assert good == [InsertStatus.ACCEPTED]
        assert isinstance(failed, StorageError)
        assert isinstance(failed.__cause__, sqlite3.Error)
        assert isinstance(unknown, NotFound)
        assert (await storage.get(T, "good")).payload == b"good"
        with pytest.raises(NotFound):
            await storage.get(T, "bad-1")


async def test_a_locked_file_is_unavailable_until_released(db: Path) -> None:
    async with opened(url_of(db, "busy_timeout_ms=20")) as storage:
        await given_topic(storage)
        # given another process holding the write lock
        with closing(sqlite3.connect(db, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            # then a write is refused as unavailable, not lost
            with pytest.raises(StorageUnavailable):
                await storage.insert(T, [msg("m")])
            other.execute("ROLLBACK")
        # and succeeds once the lock is gone
        assert await storage.insert(T, [msg("m")]) == [InsertStatus.ACCEPTED]


async def test_close_finishes_the_calls_already_made(db: Path) -> None:
    storage = storage_from_url(url_of(db))
    await storage.open()
    await storage.create_topic(Topic(T))
    # when calls are in flight as the storage closes
    *statuses, _ = await asyncio.gather(
        *(storage.insert(T, [msg(f"m{i}")]) for i in range(50)), storage.close()
    )
    # then they all completed and are on disk
    assert statuses == [[InsertStatus.ACCEPTED]] * 50
    async with opened(url_of(db)) as reopened:
        assert await reopened.counts(T, 0) == Counts(waiting=50)


async def test_a_closed_storage_is_unavailable(db: Path) -> None:
    storage = storage_from_url(url_of(db))
    await storage.open()
    assert await storage.healthy()
    await storage.close()
    assert not await storage.healthy()
    with pytest.raises(StorageUnavailable):
        await storage.list_topics()


@pytest.mark.parametrize(
    ("statement", "index", "params"),
    [
        (sql.DUE, "messages_due", (T, NOW, "[0, 1]", 10, T)),
        (sql.NEXT_DUE, "messages_due", (T, "[0, 1]")),
        (sql.LIST_DEAD, "messages_dead", (T, "", 10)),
        (sql.RELEASE_OWNER, "messages_owner", (NOW, T, "c1")),
        (sql.STATES, "PRIMARY KEY", (T, '["m"]')),
        (sql.EXISTING_IDS, "PRIMARY KEY", (T, '["m"]')),
        (sql.TAKE, "PRIMARY KEY", (NOW, "c1", T, "m")),
        (sql.KILL, "PRIMARY KEY", (NOW, T, "m")),
        (sql.DELETE_MESSAGES, "PRIMARY KEY", (T, '["m"]')),
        (sql.DELETE_PAYLOADS, "sqlite_autoindex_payloads_1", (T, '["m"]')),
        (sql.SET_STATE, "PRIMARY KEY", (NOW, 2, 1, None, 0, T, "m")),
        (sql.DUE_COUNT, "messages_due", (T, NOW, "[0, 1]")),
        (sql.LEASED_COUNT, "messages_owner", (T, NOW)),
        (sql.LIVE_DEAD, "PRIMARY KEY", (T,)),
        (sql.OLDEST, "messages_due", (T, "[0, 1]")),
        (sql.OLDEST_UNRANKED, "messages_due", (T, "[0, 1]")),
        (sql.BY_DUE, "messages_due", (T, "[0, 1]", NOW, "m", 10)),
    ],
    ids=[
        "due",
        "next_due",
        "list_dead",
        "release",
        "states",
        "existing",
        "take",
        "kill",
        "delete_messages",
        "delete_payloads",
        "set_state",
        "due_count",
        "leased_count",
        "live_dead",
        "oldest",
        "oldest_unranked",
        "by_due",
    ],
)
async def test_hot_statements_search_their_index(
    db: Path, statement: str, index: str, params: tuple[object, ...]
) -> None:
    async with opened(url_of(db)):
        with closing(sqlite3.connect(db)) as raw:
            plan = [row[3] for row in raw.execute(f"EXPLAIN QUERY PLAN {statement}", params)]
    assert any(step.startswith("SEARCH") and index in step for step in plan), plan
    assert not any(step.startswith(("SCAN messages", "SCAN payloads")) for step in plan), plan
