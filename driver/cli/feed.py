"""Items of a blocking iterator (lines of a file or of a pipe), produced in a
thread and taken on the event loop in batches.

A batch is everything waiting, up to ``lines`` items and ``budget`` bytes: a
file read at full speed gives full batches, and a line that comes alone down a
pipe (``tail -f ... | dejaq produce --jsonl -``) goes on at once, not when a
thousand more have come. The thread stops reading while ``budget`` bytes or
twice ``lines`` items wait, so memory stays bounded whatever the input's size.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Feed(Generic[T]):
    def __init__(
        self, items: Iterator[T], size_of: Callable[[T], int], lines: int, budget: int
    ) -> None:
        self._items = items
        self._size_of = size_of
        self._lines = lines
        self._budget = budget
        self._loop = asyncio.get_running_loop()
        self._lock = threading.Condition()
        self._waiting: deque[tuple[T, int]] = deque()
        self._bytes = 0
        self._done = False
        self._closed = False
        self._error: BaseException | None = None
        self._taker: asyncio.Future[None] | None = None
        self._thread = threading.Thread(target=self._read, name="dejaq-feed", daemon=True)
        self._thread.start()

    async def batch(self) -> list[T] | None:
        """The next batch, waiting for its first item; None once the input is read."""
        while True:
            with self._lock:
                if self._waiting:
                    return self._take()
                if self._done:
                    if self._error is not None:
                        raise self._error
                    return None
                taker = self._taker = self._loop.create_future()
            try:
                await taker
            finally:
                self._taker = None

    def close(self) -> None:
        """Stop reading (the thread leaves at its next item)."""
        with self._lock:
            self._closed = True
            self._lock.notify()

    def _take(self) -> list[T]:
        out: list[T] = []
        taken = 0
        while self._waiting and len(out) < self._lines:
            item, size = self._waiting[0]
            if out and taken + size > self._budget:
                break
            self._waiting.popleft()
            out.append(item)
            taken += size
        self._bytes -= taken
        self._lock.notify()
        return out

    def _read(self) -> None:
        try:
            for item in self._items:
                size = self._size_of(item)
                with self._lock:
                    while not self._closed and (
                        self._bytes >= self._budget or len(self._waiting) >= 2 * self._lines
                    ):
                        self._lock.wait()
                    if self._closed:
                        return
                    self._waiting.append((item, size))
                    self._bytes += size
                    self._wake_taker()
        except BaseException as exc:  # handed to the loop: batch() raises it
            with self._lock:
                self._error = exc
        finally:
            with self._lock:
                self._done = True
                self._wake_taker()

    def _wake_taker(self) -> None:
        """Called under the lock: wakes a batch() that waits (once)."""
        taker, self._taker = self._taker, None
        if taker is not None:
            self._loop.call_soon_threadsafe(_resolve, taker)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
