"""Columns sent to PostgreSQL as arrays in its binary format.

psycopg sends a plain Python list as an array literal in text, testing every
element against a regular expression for quoting and escaping it with
another (a payload's hex text always needs both). In the storage
micro-benchmark shaped like the steady scenario, that was ~45% of the
broker's CPU in this backend. A batch's columns are therefore one of the list
types below, and each has a dumper writing the binary array format that
``array_recv`` reads: a header, then every element as its length and its
bytes — fixed-width columns through numpy in one pass, strings and bytes
joined with their lengths. Strings are encoded in the connection's encoding,
as psycopg's own dumper does.

``register`` installs the dumpers on a connection (``pool`` does, on each one
it opens); a statement then takes ``Texts([...])`` where it took a list, with
the same SQL.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg
from psycopg.adapt import AdaptersMap, Dumper
from psycopg.pq import Format

_LENGTH = struct.Struct(">i")
_NULL = _LENGTH.pack(-1)
_HEADER = struct.Struct(">iiiii")  # dimensions, has NULLs, element type, length, lower bound
_EMPTY = struct.Struct(">iii")  # no dimensions, no NULLs, element type


class Int8s(list[int]):
    """A bigint[] column."""


class Int4s(list[int]):
    """An integer[] column."""


class Bools(list[bool]):
    """A boolean[] column."""


class Texts(list[str | None]):
    """A text[] column; None is NULL."""


class Byteas(list[bytes]):
    """A bytea[] column."""


def _header(element_oid: int, n: int, nulls: bool = False) -> bytes:
    if n == 0:
        return _EMPTY.pack(0, 0, element_oid)
    return _HEADER.pack(1, int(nulls), element_oid, n, 1)


def _fixed(element_oid: int, dtype: str, values: Sequence[Any]) -> bytes:
    """Every element has the same width: lengths and values interleaved in one array."""
    width = np.dtype(dtype).itemsize
    cells = np.empty(len(values), dtype=[("length", ">i4"), ("value", dtype)])
    cells["length"] = width
    try:
        cells["value"] = values
    except OverflowError as exc:  # as the server says it, and as psycopg raises it
        raise psycopg.errors.NumericValueOutOfRange(f"a value is out of range: {exc}") from exc
    return _header(element_oid, len(values)) + cells.tobytes()


def _variable(element_oid: int, items: Sequence[bytes | None]) -> bytes:
    """Each element its length then its bytes; None is a length of -1."""
    if None not in items:
        present: Sequence[bytes] = items  # type: ignore[assignment]
        lengths = map(_LENGTH.pack, map(len, present))
        body = b"".join(itertools.chain.from_iterable(zip(lengths, present, strict=True)))
        return _header(element_oid, len(items)) + body
    parts = [_NULL if b is None else _LENGTH.pack(len(b)) + b for b in items]
    return _header(element_oid, len(items), nulls=True) + b"".join(parts)


class _ArrayDumper(Dumper):
    format = Format.BINARY

    def _encoding(self) -> str:
        conn = self.connection
        return conn.info.encoding if conn is not None else "utf-8"


class _Int8sDumper(_ArrayDumper):
    oid = 1016  # bigint[]

    def dump(self, obj: Int8s) -> bytes:
        return _fixed(20, ">i8", obj)


class _Int4sDumper(_ArrayDumper):
    oid = 1007  # integer[]

    def dump(self, obj: Int4s) -> bytes:
        return _fixed(23, ">i4", obj)


class _BoolsDumper(_ArrayDumper):
    oid = 1000  # boolean[]

    def dump(self, obj: Bools) -> bytes:
        return _fixed(16, "u1", [bool(b) for b in obj])


class _TextsDumper(_ArrayDumper):
    oid = 1009  # text[]

    def dump(self, obj: Texts) -> bytes:
        encoding = self._encoding()
        return _variable(25, [None if s is None else s.encode(encoding) for s in obj])


class _ByteasDumper(_ArrayDumper):
    oid = 1001  # bytea[]

    def dump(self, obj: Byteas) -> bytes:
        return _variable(17, [bytes(b) for b in obj])


_DUMPERS: tuple[tuple[type[list[Any]], type[Dumper]], ...] = (
    (Int8s, _Int8sDumper),
    (Int4s, _Int4sDumper),
    (Bools, _BoolsDumper),
    (Texts, _TextsDumper),
    (Byteas, _ByteasDumper),
)


def register(adapters: AdaptersMap) -> None:
    """Let a connection (its ``adapters``) send the column types of this module."""
    for cls, dumper in _DUMPERS:
        adapters.register_dumper(cls, dumper)
