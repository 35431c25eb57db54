"""Blobs: byte strings (each message's id and payload) packed into 1 MiB chunks.

A ``bytes`` object per message costs its 33-byte header, allocator rounding
and a pointer; here a record takes a row of its size class (multiples of 16
bytes up to 256, then steps of an eighth) in a ``bytearray`` chunk, found by
a handle, ``chunk << 32 | offset``. A freed row is reused by the next record
of its class, so a steady churn allocates nothing. Records over 64 KiB get a
chunk of their own, given back when they are freed. Chunks are never moved,
so growing costs no copy, and hold no Python object per record.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from typing import Final

import numpy as np

from dejaq.core.hotpath import kernel
from dejaq.storage_plugins.memory.types import FEW, I64

CHUNK_BYTES: Final = 1 << 20
OFFSET_BITS: Final = 32
OFFSET_MASK: Final = (1 << OFFSET_BITS) - 1


def _widths() -> list[int]:
    widths = list(range(16, 257, 16))
    while widths[-1] < 64 << 10:
        widths.append(min(64 << 10, (widths[-1] * 9 // 8 + 15) // 16 * 16))
    return widths


WIDTHS: Final = _widths()
_WIDTHS: Final = np.array(WIDTHS, np.int64)
LARGEST: Final = WIDTHS[-1]
# The copy of a batch's records in C (blob_kernel.c), or None: the loop below runs.
KERNEL: Final = kernel("dejaq.storage_plugins.memory.blob_kernel")


class _Class:
    """The rows of one width: a free-row stack and the chunk being filled."""

    __slots__ = ("free", "free_count", "next", "width")

    def __init__(self, width: int) -> None:
        self.width = width
        self.free = np.zeros(0, np.int64)  # handles of freed rows
        self.free_count = 0
        self.next = -1  # handle of the next never-used row, -1 when a chunk is needed


class Blobs:
    """Byte strings by handle; the caller keeps each one's length."""

    def __init__(self) -> None:
        self.chunks: list[memoryview | None] = []  # views of the bytearray chunks
        self._classes = [_Class(w) for w in WIDTHS]
        self._unused_chunks: list[int] = []
        self.native = KERNEL is not None  # tests turn it off to compare with the loop

    def put(self, records: Sequence[bytes]) -> I64:
        """Store ``records``; their handles."""
        if len(records) <= FEW:
            return np.array([self._put_one(rec) for rec in records], np.int64)
        sizes = [len(rec) for rec in records]
        k = _one_class(sizes)
        if k >= 0:
            # The usual batch (ids and payloads of a size): one run of rows,
            # without numpy's sorting by class (its calls cost more than the work).
            handles = self._rows(k, len(sizes))
        else:
            lengths = np.array(sizes, np.int64)
            classes = np.searchsorted(_WIDTHS, lengths)
            handles = np.zeros(len(records), np.int64)
            for k in np.unique(classes).tolist():
                at = np.flatnonzero(classes == k)
                handles[at] = (
                    self._rows(k, len(at)) if k < len(WIDTHS) else self._large(lengths[at])
                )
        if self.native and KERNEL is not None:
            KERNEL.write(self.chunks, handles, records if isinstance(records, list) else [*records])
            return handles
        chunks = self.chunks
        for h, rec in zip(handles.tolist(), records, strict=True):
            o = h & OFFSET_MASK
            chunks[h >> OFFSET_BITS][o : o + len(rec)] = rec  # type: ignore[index]
        return handles

    def _put_one(self, record: bytes) -> int:
        """``put`` of one record, without arrays: a row off its class's free
        stack, else the next unused one."""
        n = len(record)
        k = bisect_left(WIDTHS, n)
        if k == len(WIDTHS):
            h = self._new_chunk(n) << OFFSET_BITS
        else:
            c = self._classes[k]
            if c.free_count:
                c.free_count -= 1
                h = int(c.free[c.free_count])
            else:
                h = int(self._rows(k, 1)[0])
        o = h & OFFSET_MASK
        self.chunks[h >> OFFSET_BITS][o : o + n] = record  # type: ignore[index]
        return h

    def view(self, handle: int, length: int) -> memoryview:
        """The record at ``handle`` (valid until it is freed)."""
        o = handle & OFFSET_MASK
        return self.chunks[handle >> OFFSET_BITS][o : o + length]  # type: ignore[index]

    def free(self, handles: I64, lengths: I64) -> None:
        """Give back the rows of records of these lengths."""
        if len(handles) <= FEW:
            for h, n in zip(handles.tolist(), lengths.tolist(), strict=True):
                self._free_one(h, n)
            return
        one = _one_class(lengths.tolist())
        if one >= 0:
            self._push_free(self._classes[one], handles)  # as put, without sorting by class
            return
        classes = np.searchsorted(_WIDTHS, lengths)
        for k in np.unique(classes).tolist():
            at = handles[classes == k]
            if k == len(WIDTHS):
                for chunk in (at >> OFFSET_BITS).tolist():
                    self.chunks[chunk] = None
                    self._unused_chunks.append(chunk)
                continue
            self._push_free(self._classes[k], at)

    @staticmethod
    def _push_free(c: _Class, handles: I64) -> None:
        """Put freed rows of class ``c`` on its free stack."""
        end = c.free_count + len(handles)
        if end > len(c.free):
            grown = np.zeros(max(end, 2 * len(c.free), 64), np.int64)
            grown[: c.free_count] = c.free[: c.free_count]
            c.free = grown
        c.free[c.free_count : end] = handles
        c.free_count = end

    def _free_one(self, handle: int, length: int) -> None:
        k = bisect_left(WIDTHS, length)
        if k == len(WIDTHS):
            chunk = handle >> OFFSET_BITS
            self.chunks[chunk] = None
            self._unused_chunks.append(chunk)
            return
        c = self._classes[k]
        if c.free_count == len(c.free):
            grown = np.zeros(max(64, 2 * len(c.free)), np.int64)
            grown[: c.free_count] = c.free
            c.free = grown
        c.free[c.free_count] = handle
        c.free_count += 1

    def _rows(self, k: int, n: int) -> I64:
        c = self._classes[k]
        reuse = min(n, c.free_count)
        start = c.free_count - reuse
        rows = [c.free[start : c.free_count].copy()]
        c.free_count = start
        n -= reuse
        if not n:
            return rows[0]  # all reused: the steady case, one slice
        per_chunk = CHUNK_BYTES // c.width
        while n:
            if c.next < 0:
                c.next = self._new_chunk(per_chunk * c.width) << OFFSET_BITS
            used = (c.next & OFFSET_MASK) // c.width
            take = min(n, per_chunk - used)
            rows.append(c.next + np.arange(take, dtype=np.int64) * c.width)
            n -= take
            c.next = -1 if used + take == per_chunk else c.next + take * c.width
        return np.concatenate(rows)

    def _large(self, lengths: I64) -> I64:
        return np.array([self._new_chunk(n) << OFFSET_BITS for n in lengths.tolist()], np.int64)

    def _new_chunk(self, size: int) -> int:
        chunk = memoryview(bytearray(size))
        if self._unused_chunks:
            number = self._unused_chunks.pop()
            self.chunks[number] = chunk
            return number
        self.chunks.append(chunk)
        return len(self.chunks) - 1


def _one_class(sizes: list[int]) -> int:
    """The size class every record of these sizes falls in, or -1 when they
    fall in several or one is too large for a class."""
    k = bisect_left(WIDTHS, min(sizes))
    if k == len(WIDTHS) or max(sizes) > WIDTHS[k]:
        return -1
    return k
