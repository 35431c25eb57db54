"""Columns: every field of every message of a topic, one numpy array per field.

A message lives in a *slot*, an index into every column. A deleted message's
slot is reused by a later insert, so the arrays only grow to the largest count
the topic has held. Its UTF-8 id, key and encoded headers followed by its
payload are one record in ``blobs``. Nothing here is a Python object per message, so the garbage
collector never walks millions of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from dejaq.storage_plugins.memory.blobs import KERNEL, OFFSET_BITS, OFFSET_MASK, Blobs
from dejaq.storage_plugins.memory.types import I64, Mask

# Slot states. A TOMB slot is a deleted message's tombstone: its id (the record
# holds nothing else), the time it was deleted in ``timestamp``, and its entry
# in the IdTable, so a produce of the id finds it taken.
FREE: Final = 0
LIVE: Final = 1
DEAD: Final = 2
TOMB: Final = 3

GROWTH: Final = 1.5
MIN_CAPACITY: Final = 64


class Columns:
    """Per-message fields indexed by slot, with freed slots reused."""

    def __init__(self) -> None:
        self.capacity = 0
        self.used = 0  # slots [0, used) have been handed out at least once
        # due time; for the dead, when they died; for a tombstone, when it was deleted
        self.timestamp = np.zeros(0, np.int64)
        self.version = np.zeros(0, np.int64)
        self.deliveries = np.zeros(0, np.uint32)
        self.max_deliveries = np.zeros(0, np.uint32)  # 0 = the topic's setting
        self.expires_at = np.zeros(0, np.int64)  # 0 = never
        self.owner = np.zeros(0, np.uint32)  # an Owners number; 0 = no lease owner
        self.bucket = np.zeros(0, np.uint16)
        self.priority = np.zeros(0, np.uint16)  # priority topics; 0 = most urgent
        self.state = np.zeros(0, np.uint8)  # FREE, LIVE, DEAD or TOMB
        self.id_hash = np.zeros(0, np.int64)  # hash(id), for IdTable
        self.id_at = np.zeros(0, np.uint32)  # the IdTable position that names this slot
        self.id_len = np.zeros(0, np.uint16)  # UTF-8 bytes of the id at the start of the record
        self.key_len = np.zeros(0, np.uint16)  # UTF-8 bytes of the key after the id (0: none)
        self.headers_len = np.zeros(0, np.uint16)  # encoded headers after the key (0: none)
        # The key's number in its timeline's time indexes (key_lanes.py; 0: none,
        # and always 0 on a priority topic, whose passes ignore keys).
        self.key_no = np.zeros(0, np.uint32)
        # Which index holds a live message's entry (key_lanes.py): 0 the bucket's
        # own, LIGHT the bucket's index of keys with few messages, else its key's
        # lane (the key's number). An index takes an entry as its own by this.
        self.lane = np.zeros(0, np.uint32)
        self.record_len = np.zeros(0, np.uint32)  # id + key + headers + payload bytes
        self.record_at = np.zeros(0, np.int64)  # the record's handle in blobs
        self.blobs = Blobs()
        self._free = np.zeros(0, np.int64)
        self._free_count = 0
        # Whether ``records`` reads in C (blob_kernel.c); tests turn it off to compare.
        self.native = KERNEL is not None
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

    def store(
        self,
        slots: I64,
        ids: list[bytes],
        payloads: Sequence[bytes],
        keys: Sequence[bytes] | None = None,
        headers: Sequence[bytes] | None = None,
    ) -> None:
        """Write the records (UTF-8 id, key, headers, payload) of new messages in
        ``slots`` (no ``keys`` / ``headers``: none)."""
        if keys is None and headers is None:
            records = list(map(bytes.__add__, ids, payloads))
            self.key_len[slots] = 0
            self.headers_len[slots] = 0
        else:
            keys = keys if keys is not None else [b""] * len(ids)
            headers = headers if headers is not None else [b""] * len(ids)
            records = list(map(b"".join, zip(ids, keys, headers, payloads, strict=True)))
            self.key_len[slots] = list(map(len, keys))
            self.headers_len[slots] = list(map(len, headers))
        self.id_len[slots] = list(map(len, ids))
        self.record_len[slots] = list(map(len, records))
        self.record_at[slots] = self.blobs.put(records)

    def rewrite(self, slot: int, payload: bytes) -> None:
        """Replace the payload of the message in ``slot`` (its id, key and headers stay)."""
        id, _ = self.record(slot)
        key, headers = self.extras_of(slot)
        slots = np.array([slot], np.int64)
        self.blobs.free(self.record_at[slots], self.record_len[slots].astype(np.int64))
        self.store(slots, [id.encode()], [payload], [key.encode()], [headers])

    def _skip(self, slots: I64) -> I64:
        """Bytes before each record's payload: its id, key and headers."""
        return (
            self.id_len[slots].astype(np.int64)
            + self.key_len[slots].astype(np.int64)
            + self.headers_len[slots].astype(np.int64)
        )

    def record(self, slot: int) -> tuple[str, bytes]:
        """The id and payload of the message in ``slot``."""
        rec = self.blobs.view(int(self.record_at[slot]), int(self.record_len[slot]))
        n = int(self.id_len[slot])
        skip = n + int(self.key_len[slot]) + int(self.headers_len[slot])
        return str(rec[:n], "utf-8"), bytes(rec[skip:])

    def extras_of(self, slot: int) -> tuple[str, bytes]:
        """The key and encoded headers of the message in ``slot``."""
        rec = self.blobs.view(int(self.record_at[slot]), int(self.record_len[slot]))
        start = int(self.id_len[slot])
        mid = start + int(self.key_len[slot])
        return str(rec[start:mid], "utf-8"), bytes(rec[mid : mid + int(self.headers_len[slot])])

    def records(self, slots: I64) -> tuple[list[str], list[bytes]]:
        """The ids and payloads of ``slots``."""
        if self.native and KERNEL is not None:
            ids_payloads: tuple[list[str], list[bytes]] = KERNEL.read(
                self.blobs.chunks,
                np.ascontiguousarray(slots, np.int64),
                self.record_at,
                self.id_len,
                self.key_len,
                self.headers_len,
                self.record_len,
            )
            return ids_payloads
        at = self.record_at[slots]
        start = at & OFFSET_MASK
        chunks = self.blobs.chunks
        ids: list[str] = []
        payloads: list[bytes] = []
        for chunk, first, mid, skip, end in zip(
            (at >> OFFSET_BITS).tolist(),
            start.tolist(),
            (start + self.id_len[slots]).tolist(),
            (start + self._skip(slots)).tolist(),
            (start + self.record_len[slots]).tolist(),
            strict=True,
        ):
            view = chunks[chunk]
            ids.append(view[first:mid].tobytes().decode())  # type: ignore[index]
            payloads.append(view[skip:end].tobytes())  # type: ignore[index]
        return ids, payloads

    def extras(self, slots: I64) -> tuple[list[str], list[bytes]]:
        """The keys and encoded headers of ``slots``."""
        at = self.record_at[slots]
        start = (at & OFFSET_MASK) + self.id_len[slots]
        mid = start + self.key_len[slots]
        end = mid + self.headers_len[slots]
        chunks = self.blobs.chunks
        keys: list[str] = []
        headers: list[bytes] = []
        for chunk, a, m, e in zip(
            (at >> OFFSET_BITS).tolist(), start.tolist(), mid.tolist(), end.tolist(), strict=True
        ):
            view = chunks[chunk]
            keys.append(view[a:m].tobytes().decode() if m > a else "")  # type: ignore[index]
            headers.append(view[m:e].tobytes())  # type: ignore[index]
        return keys, headers

    def same_ids(self, slots: I64, ids: list[bytes]) -> Mask:
        """Whether each slot's message has the id ``ids`` names (UTF-8)."""
        same: Mask = self.id_len[slots] == np.fromiter(map(len, ids), np.int64, len(ids))
        view = self.blobs.view
        for i in np.flatnonzero(same).tolist():
            slot = int(slots[i])
            if view(int(self.record_at[slot]), len(ids[i])) != ids[i]:
                same[i] = False
        return same

    def keep_ids(self, slots: I64, ids: list[bytes]) -> None:
        """Replace the records of ``slots`` by their ids alone (``ids``, UTF-8,
        in order): the payloads' rows are given back."""
        self.blobs.free(self.record_at[slots], self.record_len[slots].astype(np.int64))
        self.record_len[slots] = self.id_len[slots]
        self.key_len[slots] = 0
        self.headers_len[slots] = 0
        self.record_at[slots] = self.blobs.put(ids)

    def release(self, slots: I64) -> None:
        """Free ``slots`` for reuse (their owner must already be cleared)."""
        self.state[slots] = FREE
        self.blobs.free(self.record_at[slots], self.record_len[slots].astype(np.int64))
        end = self._free_count + len(slots)
        if end > len(self._free):
            grown = np.zeros(max(end, int(len(self._free) * GROWTH), MIN_CAPACITY), np.int64)
            grown[: self._free_count] = self._free[: self._free_count]
            self._free = grown
        self._free[self._free_count : end] = slots
        self._free_count = end

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
            "priority",
            "state",
            "id_hash",
            "id_at",
            "id_len",
            "key_len",
            "headers_len",
            "key_no",
            "lane",
            "record_len",
            "record_at",
        ):
            old = getattr(self, name)
            new = np.zeros(cap, old.dtype)
            new[:n] = old[:n]
            setattr(self, name, new)
        self.capacity = cap
