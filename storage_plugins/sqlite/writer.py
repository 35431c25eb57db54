"""The SQLite writer: one thread owns the connection and commits in groups.

Async callers submit a job (a function of the connection) and await its
future. The thread takes every job queued at that moment and runs them in ONE
transaction (``BEGIN IMMEDIATE``, so another process on the same file waits
for the write lock instead of deadlocking on an upgrade), each job inside its
own ``SAVEPOINT``: a job that raises rolls back only its own changes. Then one
``COMMIT`` — one WAL sync for the whole group — and only after it are the
futures resolved, so no caller hears "done" before its change is durable.

Every job therefore runs alone, in order, inside a transaction: a job is
atomic without any locking of its own.

A caller cancelled while its job is queued does not withdraw the job: it may
still run and commit.

The queue is bounded: at most ``max_queue`` jobs wait or run at once (a slot
is freed when the thread resolves the job, cancelled caller or not); past it a
caller waits for a slot, so a flood of calls pushes back on its callers
instead of growing memory and latency without end.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from dejaq.core.errors import StorageError, StorageUnavailable
from dejaq.storage_plugins.sqlite import sql

T = TypeVar("T")

# Primary result codes that mean "try again later" rather than "this is broken".
_UNAVAILABLE = frozenset(
    {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN}
)


def storage_error(exc: sqlite3.Error) -> StorageError:
    """The dejaq error for a sqlite3 one: busy, locked and I/O are ``StorageUnavailable``."""
    code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
    cls = StorageUnavailable if code in _UNAVAILABLE else StorageError
    return cls(f"sqlite: {exc}")


DEFAULT_MAX_QUEUE = 4096


@dataclass(slots=True)
class _Job:
    fn: Callable[[sqlite3.Connection], Any]
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop
    done: Callable[[], None]  # frees the job's queue slot, on its loop


class Writer:
    """Runs jobs on one connection in a dedicated thread, grouping commits."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        name: str,
        on_commit: Callable[[int], None] | None = None,
        max_queue: int = DEFAULT_MAX_QUEUE,
    ) -> None:
        self._conn = conn
        self.max_queue = max_queue
        self._slots: asyncio.Semaphore | None = None  # made on the loop that uses it
        self.queued = 0  # jobs waiting or running now (at most max_queue)
        # Called on the thread after each commit with the connection's count
        # of changed rows (checkpoint.py).
        self._on_commit = on_commit
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._closed = False
        self.transactions = 0  # committed groups, for tests and metrics
        self.jobs = 0  # jobs run

    def start(self) -> None:
        self._thread.start()

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in the next group commit and return its result."""
        if self._closed:
            raise StorageUnavailable("sqlite storage is closed")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_queue)
        slots = self._slots
        await slots.acquire()
        if self._closed:
            slots.release()
            raise StorageUnavailable("sqlite storage is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self.queued += 1
        self._queue.put(_Job(fn, future, loop, self._job_done))
        try:
            return await future
        except sqlite3.Error as exc:
            raise storage_error(exc) from exc

    def _job_done(self) -> None:
        self.queued -= 1
        if self._slots is not None:
            self._slots.release()

    async def close(self) -> None:
        """Run the jobs already queued, commit, close the connection."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)

    # -- the thread -----------------------------------------------------------

    def _serve(self) -> None:
        try:
            stopping = False
            while not stopping:
                items = [self._queue.get()]
                while True:
                    try:
                        items.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                group = [item for item in items if item is not None]
                stopping = len(group) < len(items)
                if not group:
                    continue
                try:
                    self._run_group(group)
                except Exception as exc:  # a bug here must not leave callers waiting
                    self._rollback()
                    _fail(group, exc)
        finally:
            self._conn.close()

    def _run_group(self, group: list[_Job]) -> None:
        conn = self._conn
        try:
            conn.execute(sql.BEGIN)
        except sqlite3.Error as exc:
            _fail(group, exc)
            return
        outcomes: list[tuple[Any, BaseException | None]] = []
        for job in group:
            try:
                conn.execute(sql.SAVEPOINT)
                value = job.fn(conn)
                conn.execute(sql.RELEASE)
                outcomes.append((value, None))
            except Exception as exc:
                lost = self._undo_job()
                if lost is not None:
                    # SQLite aborted the whole transaction: nothing of the group stays.
                    _fail(group, exc if isinstance(exc, sqlite3.Error) else lost)
                    return
                outcomes.append((None, exc))
        self.jobs += len(group)
        try:
            conn.execute(sql.COMMIT)
        except sqlite3.Error as exc:
            self._rollback()
            _fail(group, exc)
            return
        self.transactions += 1
        if self._on_commit is not None:
            self._on_commit(conn.total_changes)
        for job, (value, error) in zip(group, outcomes, strict=True):
            _resolve(job, value, error)

    def _undo_job(self) -> BaseException | None:
        """Roll back the failed job; an error when the whole transaction is gone."""
        conn = self._conn
        try:
            conn.execute(sql.ROLLBACK_TO)
            conn.execute(sql.RELEASE)
        except sqlite3.Error as exc:
            self._rollback()
            return exc
        if not conn.in_transaction:
            return StorageError("sqlite aborted the transaction")
        return None

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            try:
                self._conn.execute(sql.ROLLBACK)
            except sqlite3.Error:
                pass  # the connection reports the failure on its next statement


def _fail(group: list[_Job], exc: BaseException) -> None:
    for job in group:
        _resolve(job, None, exc)  # run() wraps a sqlite3 error for each caller


def _resolve(job: _Job, value: Any, error: BaseException | None) -> None:
    try:
        job.loop.call_soon_threadsafe(_settle, job, value, error)
    except RuntimeError:
        pass  # the caller's loop is closed: nobody is waiting


def _settle(job: _Job, value: Any, error: BaseException | None) -> None:
    job.done()
    future = job.future
    if future.done():  # the caller was cancelled
        return
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(error)
