"""``sqlite://`` — the embedded persistent backend: one file, no server.

One writer thread per instance owns the connection and commits concurrent
calls in groups (``writer``); WAL checkpoints run beside it
(``checkpoint``), and so do the long reads, the census (``census``) and
scans (``scan``), each on connections of its own; a deleted topic's rows are
removed after it, a chunk at a time (``purge``); what each call does is in
``ops``, its SQL in ``sql``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar
from urllib.parse import parse_qsl, unquote, urlsplit

from dejaq.core.buckets import Buckets
from dejaq.core.errors import InvalidArgument, StorageError
from dejaq.core.model import (
    Counts,
    InsertStatus,
    Leases,
    Message,
    NewMessage,
    OnDuplicate,
    Settled,
    Topic,
)
from dejaq.core.redact import redact
from dejaq.storage_plugins.base import (
    Forecast,
    HandBack,
    KeyLoad,
    LeaseRequest,
    Migration,
    Outcome,
    ScanPage,
    SettleItem,
    Storage,
    TopicCensus,
)
from dejaq.storage_plugins.sqlite import ops, sql
from dejaq.storage_plugins.sqlite.census import CensusReader
from dejaq.storage_plugins.sqlite.checkpoint import Checkpointer
from dejaq.storage_plugins.sqlite.purge import CHUNK, Purger
from dejaq.storage_plugins.sqlite.scan import ScanReader
from dejaq.storage_plugins.sqlite.writer import DEFAULT_MAX_QUEUE, Writer, storage_error

_OPEN_RETRY_S = 0.05
P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SqliteOptions:
    """A ``sqlite://`` URL read (see ``SqliteStorage``)."""

    path: Path
    synchronous: str = "normal"
    busy_timeout_ms: int = 5000
    max_queue: int = DEFAULT_MAX_QUEUE


def parse_url(url: str) -> SqliteOptions:
    """Read a ``sqlite:///path?option=value`` URL; ``InvalidArgument`` names what is wrong."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite" or parts.netloc or len(parts.path) < 2:
        raise InvalidArgument(f"expected sqlite:///path/to/file.db, got {redact(url)!r}")
    path = unquote(parts.path[1:])
    if path == ":memory:":
        raise InvalidArgument("sqlite:///:memory: is not supported: use memory://")
    options = SqliteOptions(Path(path))
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "synchronous" and value.lower() in sql.SYNCHRONOUS:
            options = dataclasses.replace(options, synchronous=value.lower())
        elif key == "busy_timeout_ms" and value.isdigit():
            options = dataclasses.replace(options, busy_timeout_ms=int(value))
        elif key == "max_queue" and value.isdigit() and int(value) > 0:
            options = dataclasses.replace(options, max_queue=int(value))
        elif key in ("synchronous", "busy_timeout_ms", "max_queue"):
            raise InvalidArgument(f"bad value {value!r} for sqlite option {key!r}")
        else:
            raise InvalidArgument(
                f"unknown sqlite option {key!r}: expected synchronous, busy_timeout_ms or max_queue"
            )
    return options


def connect(options: SqliteOptions) -> sqlite3.Connection:
    """Open the file in WAL mode and create or check the schema. Brokers starting
    together on a new file race to switch it to WAL, which SQLite answers with
    "database is locked" at once, busy timeout or not: try again until it passes."""
    deadline = time.monotonic() + options.busy_timeout_ms / 1000
    while True:
        try:
            return _connect(options)
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(_OPEN_RETRY_S)


def stored_version(path: Path) -> int | None:
    """The file's stored format version (``PRAGMA user_version``); None: no file yet."""
    if not path.exists():
        return None
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        version: int = conn.execute(sql.GET_USER_VERSION).fetchone()[0]
    finally:
        conn.close()
    return version or None


def _connect(options: SqliteOptions) -> sqlite3.Connection:
    options.path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(
        options.path,
        timeout=options.busy_timeout_ms / 1000,
        isolation_level=None,  # transactions are explicit (the writer's BEGIN)
        check_same_thread=False,  # made here, then used by the writer thread only
    )
    try:
        mode = conn.execute(sql.JOURNAL_WAL).fetchone()[0]
        if mode != "wal":
            raise StorageError(f"sqlite: cannot use WAL journal for {options.path} ({mode})")
        conn.execute(sql.SYNCHRONOUS[options.synchronous])
        conn.execute(sql.AUTOCHECKPOINT)
        conn.execute(sql.JOURNAL_SIZE_LIMIT)
        conn.execute(sql.BEGIN)
        version = conn.execute(sql.GET_USER_VERSION).fetchone()[0]
        if version > sql.SCHEMA_VERSION:
            raise StorageError(
                f"sqlite: {options.path} holds dejaq's stored format version {version},"
                f" newer than {sql.SCHEMA_VERSION}, the newest this dejaq reads:"
                " run a dejaq that reads it"
            )
        # Migrations from an older version go here, one step per version.
        for statement in sql.SCHEMA:
            conn.execute(statement)
        columns = {row[0] for row in conn.execute(sql.MESSAGE_COLUMNS)}
        if "priority" not in columns:
            conn.execute(sql.ADD_PRIORITY)  # a file from before version 3
        if "key" not in columns:
            conn.execute(sql.ADD_KEY)  # a file from before version 6
        if "headers" not in {row[0] for row in conn.execute(sql.PAYLOAD_COLUMNS)}:
            conn.execute(sql.ADD_HEADERS)
        for statement in sql.KEY_INDEXES:
            conn.execute(statement)
        if version < sql.SCHEMA_VERSION:
            conn.execute(sql.FILL_COUNTS)  # a file from before version 4 (or a new one: no rows)
        conn.execute(sql.INSERT_IDENTITY, (uuid.uuid4().hex,))
        conn.execute(sql.SET_USER_VERSION)
        conn.execute(sql.COMMIT)
    except BaseException:
        conn.close()
        raise
    return conn


class SqliteStorage(Storage):
    """SQLite storage in one file, shared by the brokers on one machine.

    URL: ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (the
    path is what follows the third slash, as in SQLAlchemy), with options:

    - ``synchronous=normal`` (default): WAL journal and ``synchronous=NORMAL``.
      A committed call survives the process being killed (even ``kill -9``):
      the WAL is in the OS page cache. A power loss or OS crash may lose the
      last commits (never corrupt the file).
    - ``synchronous=full``: the WAL is synced to disk on every commit, so an
      acknowledged call also survives power loss. Group commit makes this
      cheaper: one sync per group of concurrent calls.
    - ``busy_timeout_ms=5000``: how long to wait for another process holding
      the write lock before failing with ``StorageUnavailable``.
    - ``max_queue=4096``: calls queued for the writer thread at most; more
      wait for a slot (``writer``).

    The parent directory is created; ``sqlite:///:memory:`` is refused (use
    ``memory://``). Several processes (brokers) may share one file: each call
    takes the write lock (``BEGIN IMMEDIATE``), so leases stay exclusive.
    """

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.options = parse_url(url)
        self._writer: Writer | None = None
        self._checkpointer: Checkpointer | None = None
        self._scan_reader: ScanReader | None = None
        self._purger: Purger | None = None
        # Rows of each table a deleted topic loses per writer job (purge.py).
        self.purge_chunk = CHUNK
        self._census_reader = CensusReader(self.options.path, self.options.busy_timeout_ms)

    @property
    def transactions(self) -> int:
        """Transactions committed so far: fewer than calls when commits were grouped."""
        return self._writer.transactions if self._writer else 0

    async def open(self) -> None:
        try:
            conn = await asyncio.to_thread(connect, self.options)
        except sqlite3.Error as exc:
            raise storage_error(exc) from exc
        except OSError as exc:
            raise StorageError(f"sqlite: cannot open {self.options.path}: {exc}") from exc
        options = self.options
        checkpointer = Checkpointer(options.path, options.synchronous, options.busy_timeout_ms)
        checkpointer.start()
        self._checkpointer = checkpointer
        name = f"dejaq-sqlite {options.path}"
        self._writer = Writer(
            conn, name=name, on_commit=checkpointer.committed, max_queue=options.max_queue
        )
        self._writer.start()
        self._scan_reader = ScanReader(options.path, options.busy_timeout_ms)
        self._purger = Purger(self._run, self.purge_chunk)
        self._purger.start()

    async def migrate(self) -> Migration:
        """``open`` upgrades an older file (``connect``); this reports it. A
        missing file is refused, not made: a broker makes its file when it first
        starts, and a mistyped path must not leave a new store behind."""
        if not await asyncio.to_thread(self.options.path.exists):
            raise StorageError(
                f"sqlite: no store at {self.options.path}: nothing to migrate"
                " (a broker makes the file when it first starts)"
            )
        try:
            before = await asyncio.to_thread(stored_version, self.options.path)
        except sqlite3.Error as exc:
            raise storage_error(exc) from exc
        await self.open()
        await self.close()
        return Migration(before, sql.SCHEMA_VERSION, 0)

    async def close(self) -> None:
        # The purger first: it queues writer jobs. Then the checkpointer: the
        # writer's connection, closed last, checkpoints what is left and
        # removes the WAL.
        if self._purger is not None:
            await self._purger.close()
        if self._checkpointer is not None:
            await asyncio.to_thread(self._checkpointer.close)
        await asyncio.to_thread(self._census_reader.close)
        if self._scan_reader is not None:
            await asyncio.to_thread(self._scan_reader.close)
        if self._writer is not None:
            await self._writer.close()

    async def healthy(self) -> bool:
        try:
            await self._run(lambda conn: conn.execute(sql.PING).fetchone())
        except StorageError:
            return False
        return True

    async def _run(
        self,
        fn: Callable[Concatenate[sqlite3.Connection, P], T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        if self._writer is None:
            raise StorageError("sqlite storage used before open()")
        return await self._writer.run(lambda conn: fn(conn, *args, **kwargs))

    async def _identity(self) -> str:
        return await self._run(ops.identity)

    # -- topics ---------------------------------------------------------------

    async def _create_topic(self, topic: Topic) -> None:
        # A deleted topic of the same name may still have rows being removed:
        # removed here first, a chunk a job, so the new topic starts empty.
        while not await self._run(ops.create_topic, topic, self.purge_chunk):
            pass

    async def _delete_topic(self, name: str) -> None:
        await self._run(ops.delete_topic, name)
        if self._purger is not None:
            self._purger.doomed()

    async def _update_topic(self, topic: Topic) -> bool:
        return await self._run(ops.update_topic, topic)

    async def _get_topic(self, name: str) -> Topic | None:
        return await self._run(ops.get_topic, name)

    async def _list_topics(self) -> list[Topic]:
        return await self._run(ops.list_topics)

    # -- messages -------------------------------------------------------------

    async def _insert(self, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]:
        return await self._run(ops.insert, topic, messages)

    async def _debounce(
        self, topic: str, messages: Sequence[NewMessage], mode: OnDuplicate, now: int
    ) -> list[InsertStatus]:
        return await self._run(ops.debounce, topic, messages, mode, now)

    async def _lease(self, request: LeaseRequest) -> Leases:
        return await self._run(ops.lease, request)

    async def _promote(self, topic: str, buckets: Buckets, now: int, limit: int) -> int:
        return await self._run(ops.promote, topic, buckets, now, limit)

    async def _next_due(self, topic: str, buckets: Buckets) -> int | None:
        return await self._run(ops.next_due, topic, buckets)

    async def _ack(
        self, topic: str, items: Sequence[SettleItem], owner: str, now: int
    ) -> list[Outcome]:
        return await self._run(ops.ack, topic, items, owner, now)

    async def _extend(
        self, topic: str, items: Sequence[SettleItem], owner: str, until: int
    ) -> list[Outcome]:
        return await self._run(ops.extend, topic, items, owner, until)

    async def _nack(
        self, topic: str, items: Sequence[SettleItem], owner: str, at: int, max_deliveries: int
    ) -> list[Outcome]:
        return await self._run(ops.nack, topic, items, owner, at, max_deliveries)

    async def _hand_back(self, topic: str, items: Sequence[HandBack], owner: str) -> list[Outcome]:
        return await self._run(ops.hand_back, topic, items, owner)

    async def _move(
        self,
        topic: str,
        id: str,
        version: int,
        at: int,
        now: int,
        payload: bytes | None,
        priority: int | None,
    ) -> Settled:
        return await self._run(ops.move, topic, id, version, at, now, payload, priority)

    async def _cancel(self, topic: str, id: str, version: int, now: int) -> Settled:
        return await self._run(ops.cancel, topic, id, version, now)

    async def _get(self, topic: str, id: str) -> Message | None:
        return await self._run(ops.get, topic, id)

    async def _release(self, topic: str, owner: str, now: int) -> int:
        return await self._run(ops.release, topic, owner, now)

    async def _counts(self, topic: str, now: int) -> Counts:
        return await self._run(ops.counts, topic, now)

    async def _census(self, now: int) -> dict[str, TopicCensus]:
        try:
            return await asyncio.to_thread(self._census_reader.census, now)
        except sqlite3.Error as exc:
            raise storage_error(exc) from exc

    async def _forecast(self, topic: str, request: Forecast) -> list[int]:
        return await self._run(ops.forecast, topic, request)

    async def _list_dead(self, topic: str, after_id: str, limit: int) -> list[Message]:
        return await self._run(ops.list_dead, topic, after_id, limit)

    async def _scan(self, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
        if self._scan_reader is None:
            raise StorageError("sqlite storage used before open()")
        try:
            return await self._scan_reader.scan(topic, bucket, after_id, limit)
        except sqlite3.Error as exc:
            raise storage_error(exc) from exc

    async def _by_due(self, topic: str, after: tuple[int, str] | None, limit: int) -> list[Message]:
        return await self._run(ops.by_due, topic, after, limit)

    async def _keys(self, topic: str, now: int, limit: int) -> list[KeyLoad]:
        return await self._run(ops.keys, topic, now, limit)

    async def _redrive(self, topic: str, ids: Sequence[str] | None, at: int) -> int:
        return await self._run(ops.redrive, topic, ids, at)

    async def _purge_dead(self, topic: str, died_before: int) -> int:
        return await self._run(ops.purge_dead, topic, died_before)

    async def _forget_tombstones(self, topic: str, ids: Sequence[str]) -> int:
        return await self._run(ops.forget_tombstones, topic, ids)

    async def _purge_tombstones(self, topic: str, deleted_before: int, limit: int) -> int:
        return await self._run(ops.purge_tombstones, topic, deleted_before, limit)
