"""WAL checkpoints on a thread of their own, off the writer's path.

SQLite's automatic checkpoint runs inside the ``COMMIT`` that crosses its
threshold (1,000 pages): that commit copies the WAL into the database file and
syncs it, and every call queued behind it waits. Measured here: commit p99
8.5 ms (max 11-30 ms) with it, 0.5 ms without — the SQLite p99 lateness of
issue 8. So the writer's connection never checkpoints; this thread does,
``PASSIVE`` (it never blocks the writer), on its own connection, after every
``every`` committed groups: nothing runs while the storage is idle.

A passive checkpoint copies what it can; the WAL is reused from its start
only if it was copied entirely when the writer begins a transaction. A
writer that never pauses outruns that, so when the WAL passes ``max_frames``
this thread asks the writer (``committed`` returns True) to checkpoint once
itself between two groups: only the little written since this thread's last
pass is left to copy, and the writer's next transaction restarts the WAL.
(A blocking checkpoint here instead would hold the writer in SQLite's busy
handler, which sleeps in steps of up to 100 ms.)
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

from dejaq.storage_plugins.sqlite import sql

log = logging.getLogger(__name__)

EVERY = 64  # committed groups between checkpoints
MAX_FRAMES = 4_096  # WAL pages (16 MiB at 4 KiB) before the writer checkpoints


class Checkpointer:
    """Checkpoints the WAL of ``path`` when told enough was committed."""

    def __init__(
        self,
        path: Path,
        synchronous: str,
        busy_timeout_ms: int,
        every: int = EVERY,
        max_frames: int = MAX_FRAMES,
    ) -> None:
        self._path = path
        self._synchronous = synchronous
        self._timeout_s = busy_timeout_ms / 1000
        self._every = every
        self._max_frames = max_frames
        self._commits = 0
        self._too_long = False  # the WAL passed max_frames: the writer should help
        self._due = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name=f"{path} checkpoints", daemon=True)
        self.checkpoints = 0  # run so far, for tests

    def start(self) -> None:
        self._thread.start()

    def committed(self) -> bool:
        """Called by the writer after each commit (on its thread); True when the
        writer should now run one checkpoint itself, outside a transaction."""
        if self._too_long:
            self._too_long = False
            return True
        self._commits += 1
        if self._commits >= self._every:
            self._commits = 0
            self._due.set()
        return False

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
                self._checkpoint(conn)
        finally:
            conn.close()

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            _, frames, _ = conn.execute(sql.CHECKPOINT).fetchone()
            self._too_long = frames > self._max_frames
        except sqlite3.Error as exc:  # the next one tries again; the writer is unaffected
            log.warning("sqlite checkpoint of %s failed: %s", self._path, exc)
        self.checkpoints += 1
