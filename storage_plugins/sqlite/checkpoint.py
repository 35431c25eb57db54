"""WAL checkpoints on a thread of their own, off the writer's path.

SQLite's automatic checkpoint runs inside the ``COMMIT`` that crosses its
threshold (1,000 pages): that commit copies the WAL into the database file and
syncs it, and every call queued behind it waits. Measured here: commit p99
8.5 ms (max 11-30 ms) with it, 0.5 ms without, which showed as delivery
lateness. So this thread checkpoints, ``PASSIVE`` (it never blocks the
writer), on its own connection, each time the writer has changed ``every``
rows since the last time: nothing runs while the storage is idle.

Once a checkpoint has copied the whole WAL, the writer's next transaction
starts it again from the beginning, so the WAL stays short as long as the
writer pauses now and then. For a writer that never does, its connection
keeps SQLite's own checkpoint with a high threshold (``sql.AUTOCHECKPOINT``)
as a bound, reached rarely and with little left to copy.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

from dejaq.storage_plugins.sqlite import sql

log = logging.getLogger(__name__)

EVERY = 2_000  # rows changed by the writer between two checkpoints


class Checkpointer:
    """Checkpoints the WAL of ``path`` when told enough was written."""

    def __init__(
        self, path: Path, synchronous: str, busy_timeout_ms: int, every: int = EVERY
    ) -> None:
        self._path = path
        self._synchronous = synchronous
        self._timeout_s = busy_timeout_ms / 1000
        self.every = every
        self._last = 0  # the writer's change count at the last request
        self._due = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name=f"{path} checkpoints", daemon=True)
        self.checkpoints = 0  # run so far, for tests

    def start(self) -> None:
        self._thread.start()

    def committed(self, changes: int) -> None:
        """Called by the writer after each commit (on its thread) with its
        connection's ``total_changes``."""
        if changes - self._last >= self.every:
            self._last = changes
            self._due.set()

    def close(self) -> None:
        """Stop the thread (blocking; a checkpoint under way finishes first)."""
        self._stopping = True
        self._due.set()
        if self._thread.is_alive():
            self._thread.join()

    def _serve(self) -> None:
        conn = sqlite3.connect(self._path, timeout=self._timeout_s, isolation_level=None)
        try:
            conn.execute(sql.SYNCHRONOUS[self._synchronous])
            while True:
                self._due.wait()
                self._due.clear()
                if self._stopping:
                    return
                try:
                    conn.execute(sql.CHECKPOINT).fetchall()
                except sqlite3.Error as exc:  # the next one tries again; the writer is unaffected
                    log.warning("sqlite checkpoint of %s failed: %s", self._path, exc)
                self.checkpoints += 1
        finally:
            conn.close()
