"""Graves: the slots of a topic's tombstones in the order they were made.

Deletes come at the broker's "now", which only moves forward (but for a
clock stepping back), so the oldest tombstones sit at the head: a purge pops
them from there and stops at the first one not old enough, never scanning
every slot. An entry may have gone stale (its tombstone forgotten by id, the
slot maybe reused): the columns are the truth, and the caller skips an entry
whose slot is no longer a tombstone. 8 bytes per entry, in one numpy array.
"""

from __future__ import annotations

import numpy as np

from dejaq.storage_plugins.memory.types import I64

MIN_CAPACITY = 64


class Graves:
    """A FIFO of slots (int64), grown and compacted in place."""

    def __init__(self) -> None:
        self._slots = np.zeros(MIN_CAPACITY, np.int64)
        self._head = 0
        self._tail = 0

    def __len__(self) -> int:
        return self._tail - self._head

    def push(self, slots: I64) -> None:
        n = len(slots)
        if self._tail + n > len(self._slots):
            live = self._slots[self._head : self._tail]
            grown = np.zeros(max(MIN_CAPACITY, 2 * (len(live) + n)), np.int64)
            grown[: len(live)] = live
            self._slots, self._head, self._tail = grown, 0, len(live)
        self._slots[self._tail : self._tail + n] = slots
        self._tail += n

    def peek(self, n: int) -> I64:
        """Up to ``n`` slots from the head (not removed)."""
        return self._slots[self._head : min(self._tail, self._head + n)]

    def pop(self, n: int) -> None:
        """Remove ``n`` slots from the head."""
        self._head = min(self._tail, self._head + n)
        if self._head == self._tail:
            self._head = self._tail = 0
