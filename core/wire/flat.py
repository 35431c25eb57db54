"""FlatBuffers tables of vectors, read and written in a few calls.

Every table of fbs/batch.fbs is a row of columns: vectors of scalars, plus at
most a scalar or two. The accessors flatc generates for Python walk the buffer
one field access at a time (a dozen Python calls a column, ~50-150 us a small
frame); at one message a frame that was most of a frame's cost. This module
reads and writes the same bytes with a handful of ``struct`` calls a table:

- ``Reader`` reads the root table's vtable once; ``vector``, ``blob`` and
  ``scalar`` then cost one bounds check and one slice or ``numpy.frombuffer``
  each. Every offset is checked against the buffer, so a corrupt frame raises
  ``InvalidArgument`` and never reads outside it.
- ``write_table`` lays a buffer out front to back: the root offset, the
  vtable, the table (scalars, then one offset a vector), then the vectors,
  each vector's elements aligned to their size as the format asks.

The generated classes (fbs/batch) stay the reference: tests/core/
test_wire_flat.py reads what this writes with them and the other way round.
A field is addressed by its slot, its position in the table's declaration
(0 for the first field).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any, Final

import numpy as np

from dejaq.core.errors import InvalidArgument

_U16: Final = struct.Struct("<H")
_U32: Final = struct.Struct("<I")
_I32: Final = struct.Struct("<i")
_VTABLE_HEAD: Final = struct.Struct("<HH")


class Reader:
    """The root table of a finished FlatBuffer, read field by field by slot."""

    __slots__ = ("_buf", "_fields", "_size", "_table", "_what")

    def __init__(self, buf: bytes, what: str) -> None:
        self._buf = buf
        self._what = what
        size = self._size = len(buf)
        if size < 12:
            self._bad("too short")
        (table,) = _U32.unpack_from(buf, 0)
        self._check(table, 4)
        (back,) = _I32.unpack_from(buf, table)
        vtable = table - back
        self._check(vtable, 4)
        vsize, _ = _VTABLE_HEAD.unpack_from(buf, vtable)
        if vsize < 4 or vsize % 2:
            self._bad("bad vtable")
        self._check(vtable, vsize)
        self._table = table
        self._fields: tuple[int, ...] = struct.unpack_from(f"<{(vsize - 4) // 2}H", buf, vtable + 4)

    def has(self, slot: int) -> bool:
        return slot < len(self._fields) and self._fields[slot] != 0

    def vector(self, slot: int, dtype: Any) -> np.ndarray[Any, Any] | None:
        """A vector of scalars (a read-only view of the buffer); None when absent."""
        span = self._vector(slot, np.dtype(dtype).itemsize)
        if span is None:
            return None
        start, count = span
        return np.frombuffer(self._buf, dtype, count, start)

    def blob(self, slot: int) -> bytes | None:
        """A vector of bytes, as bytes; None when absent."""
        span = self._vector(slot, 1)
        if span is None:
            return None
        start, count = span
        return self._buf[start : start + count]

    def scalar(self, slot: int, fmt: struct.Struct, default: int) -> int:
        if not self.has(slot):
            return default
        at = self._table + self._fields[slot]
        self._check(at, fmt.size)
        value: int = fmt.unpack_from(self._buf, at)[0]
        return value

    def _vector(self, slot: int, itemsize: int) -> tuple[int, int] | None:
        if not self.has(slot):
            return None
        at = self._table + self._fields[slot]
        self._check(at, 4)
        vec = at + _U32.unpack_from(self._buf, at)[0]
        self._check(vec, 4)
        (count,) = _U32.unpack_from(self._buf, vec)
        self._check(vec + 4, count * itemsize)
        return vec + 4, count

    def _check(self, at: int, size: int) -> None:
        if at < 0 or at + size > self._size:
            self._bad("an offset points outside the frame")

    def _bad(self, why: str) -> None:
        raise InvalidArgument(f"malformed {self._what} frame: {why}")


def write_table(
    vectors: Sequence[tuple[int, bytes, int]], scalars: Sequence[tuple[int, int]] = ()
) -> bytes:
    """A finished FlatBuffer whose root table holds ``vectors`` (slot, the
    elements as little-endian bytes, the size of one element) and 8-byte
    ``scalars`` (slot, a signed value)."""
    slots = max([s for s, _, _ in vectors] + [s for s, _ in scalars], default=-1) + 1
    field_at = [0] * slots
    # The table: its offset to the vtable, the scalars (8-aligned), the vector offsets.
    table_size = 8 if scalars else 4
    for slot, _ in scalars:
        field_at[slot] = table_size
        table_size += 8
    for slot, _, _ in vectors:
        field_at[slot] = table_size
        table_size += 4
    vtable_size = 4 + 2 * slots
    table = _align(4 + vtable_size, 8)  # after the root offset and the vtable
    vtable = table - vtable_size
    parts = [
        _U32.pack(table),
        b"\0" * (vtable - 4),
        struct.pack(f"<{2 + slots}H", vtable_size, table_size, *field_at),
        _I32.pack(table - vtable),
    ]
    if scalars:
        parts.append(b"\0" * 4)
        parts.append(struct.pack(f"<{len(scalars)}q", *(v for _, v in scalars)))
    # Then each vector: its length, then its elements, aligned to their size.
    at = table + table_size
    offsets = []
    data: list[bytes] = []
    for slot, raw, itemsize in vectors:
        start = _align(at + 4, max(itemsize, 4))
        data.append(b"\0" * (start - 4 - at))
        data.append(_U32.pack(len(raw) // itemsize))
        data.append(raw)
        offsets.append(start - 4 - (table + field_at[slot]))
        at = start + len(raw)
    parts.append(struct.pack(f"<{len(offsets)}I", *offsets))
    parts += data
    return b"".join(parts)


def _align(at: int, to: int) -> int:
    return (at + to - 1) // to * to
