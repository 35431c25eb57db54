"""Removing deleted topics' rows, a bounded chunk per writer job.

Deleting a topic in one transaction held the writer for as long as its rows
took to remove: seconds for a million messages (3.3 s, and 15 s on a busy
machine), during which every other topic's produce, lease and ack waited. So
``ops.delete_topic`` only removes the topic's row and marks its name doomed
(one transaction, at once: the topic is gone for every call), and this task
removes the rows afterwards, ``chunk`` of each table per job, each job queued
behind whatever else is waiting; after each job it waits as long as the job
took. The removal so takes at most half the writer's time, and the calls of
other topics queue behind one chunk at most. It writes a lot to the WAL (an
index page for a few rows removed): under a steady stream of other writes the
WAL may reach the writer's own checkpoint bound (``sql.AUTOCHECKPOINT``),
whose checkpoint holds one commit for a fraction of a second, as any
sustained bulk write does (``benchmarks/topic_delete.py`` shows it).

It runs while the storage is open, wakes when a topic is deleted, and on open
finds what a stopped broker left doomed, so a removal stopped half-way goes
on after a restart. Several brokers on one file may remove the same topic's
chunks: a chunk removes what is there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from dejaq.core.errors import StorageError
from dejaq.storage_plugins.sqlite import ops

log = logging.getLogger(__name__)

# Rows of each table removed by one job: a few ms of the writer's time
# (benchmarks/topic_delete.py).
CHUNK = 500
# After a failed chunk (the file busy with another process), wait this long.
RETRY_S = 1.0

Run = Callable[..., Awaitable[Any]]


class Purger:
    """Removes the rows of doomed topics through ``run`` (the writer's)."""

    def __init__(self, run: Run, chunk: int = CHUNK) -> None:
        self._run = run
        self.chunk = chunk
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._wake.set()  # the doomed topics a stopped broker left
        self._task = asyncio.create_task(self._serve(), name="dejaq-sqlite-purge")

    def doomed(self) -> None:
        """A topic was deleted: remove its rows."""
        self._wake.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _serve(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                for name in await self._run(ops.doomed_topics):
                    await self._purge(name)
            except StorageError as exc:
                log.warning("sqlite: removing a deleted topic's rows failed, retrying: %s", exc)
            except Exception:  # a bug: said, and tried again rather than left undone
                log.exception("sqlite: removing a deleted topic's rows failed, retrying")
            else:
                continue
            self._wake.set()
            await asyncio.sleep(RETRY_S)

    async def _purge(self, name: str) -> None:
        while True:
            start = time.monotonic()
            if await self._run(ops.purge_chunk, name, self.chunk):
                return
            await asyncio.sleep(time.monotonic() - start)
