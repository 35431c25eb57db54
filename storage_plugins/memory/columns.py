"""Columns: every field of every message of a topic, one numpy array per field.

A message lives in a *slot*, an index into every column. A deleted message's
slot is reused by a later insert, so the arrays only grow to the largest count
the topic has held. Numpy arrays hold no Python object per message, so the
garbage collector never walks millions of records; only ``records`` holds
objects (one ``bytes`` per message: the UTF-8 id followed by the payload), in
an object array, which the collector does not traverse either.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]

# Slot states.
FREE, LIVE, DEAD = 0, 1, 2

GROWTH = 1.5
MIN_CAPACITY = 64


class Columns:
    """Per-message fields indexed by slot, with freed slots reused."""

    def __init__(self) -> None:
        self.capacity = 0
        self.used = 0  # slots [0, used) have been handed out at least once
        self.timestamp = np.zeros(0, np.int64)  # due time; for the dead, when they died
        self.version = np.zeros(0, np.int64)
        self.deliveries = np.zeros(0, np.uint32)
        self.max_deliveries = np.zeros(0, np.uint32)  # 0 = the topic's setting
        self.expires_at = np.zeros(0, np.int64)  # 0 = never
        self.owner = np.zeros(0, np.uint32)  # an Owners number; 0 = no lease owner
        self.bucket = np.zeros(0, np.uint16)
        self.state = np.zeros(0, np.uint8)  # FREE, LIVE or DEAD
        self.id_hash = np.zeros(0, np.int64)  # hash(id), for IdTable
        self.id_len = np.zeros(0, np.uint16)  # UTF-8 bytes of the id at the start of the record
        self.records = np.empty(0, object)  # id bytes + payload, None when FREE
        self._free = np.zeros(0, np.int64)
        self._free_count = 0
        self._grow(1)  # never empty: a gather at slot 0 is always in bounds

    def allocate(self, n: int) -> I64:
        """``n`` slots for new messages: freed ones first, then never-used ones."""
        reuse = min(n, self._free_count)
        start = self._free_count - reuse
        recycled = self._free[start : self._free_count].copy()
        self._free_count = start
        fresh = n - reuse
        if self.used + fresh > self.capacity:
            self._grow(self.used + fresh)
        new = np.arange(self.used, self.used + fresh, dtype=np.int64)
        self.used += fresh
        return np.concatenate((recycled, new)) if reuse else new

    def release(self, slots: I64) -> None:
        """Free ``slots`` for reuse (their owner must already be cleared)."""
        self.state[slots] = FREE
        self.records[slots] = None
        end = self._free_count + len(slots)
        if end > len(self._free):
            grown = np.zeros(max(end, int(len(self._free) * GROWTH), MIN_CAPACITY), np.int64)
            grown[: self._free_count] = self._free[: self._free_count]
            self._free = grown
        self._free[self._free_count : end] = slots
        self._free_count = end

    def record(self, slot: int) -> tuple[str, bytes]:
        """The id and payload of the message in ``slot``."""
        rec: bytes = self.records[slot]
        n = int(self.id_len[slot])
        return rec[:n].decode(), rec[n:]

    def slots_in(self, state: int) -> I64:
        """Every slot in ``state`` (a scan of one byte per slot)."""
        return np.flatnonzero(self.state[: self.used] == state)

    def _grow(self, needed: int) -> None:
        # np.zeros maps fresh pages lazily, so the unused tail of a grown column
        # costs address space, not resident memory, until slots reach it.
        cap = max(needed, int(self.capacity * GROWTH), MIN_CAPACITY)
        n = self.used
        for name in (
            "timestamp",
            "version",
            "deliveries",
            "max_deliveries",
            "expires_at",
            "owner",
            "bucket",
            "state",
            "id_hash",
            "id_len",
        ):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[:n] = old[:n]
            setattr(self, name, new)
        records = np.empty(cap, object)
        records[:n] = self.records[:n]
        self.records = records
        self.capacity = cap
