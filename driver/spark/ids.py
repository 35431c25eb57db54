"""Deterministic message ids from key columns.

The same key values give the same id in every run, task attempt and machine,
so a retried Spark task or a re-run job finds its rows already scheduled
(DUPLICATE) instead of scheduling them twice. The id is ``k-`` and 32 hex
digits of BLAKE2b over the key values, each length-prefixed (so ``("ab", "c")``
and ``("a", "bc")`` differ) with nulls marked apart from any string; a value
is hashed as Arrow prints it, binary as hex. Changing the key columns or their
types changes the ids.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

PREFIX = "k-"
_NULL = "\x00"  # no printed value is this one character


def _printed(column: pa.Array) -> list[str | None]:
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return [None if v is None else v.hex() for v in column.to_pylist()]
    printed: list[str | None] = pc.cast(column, pa.string()).to_pylist()
    return printed


def key_id(values: Sequence[str | None]) -> str | None:
    """The id of one row's key values (as printed); None when every one is null."""
    if all(v is None for v in values):
        return None
    text = "".join(_NULL if v is None else f"{len(v)}:{v}" for v in values)
    return PREFIX + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def key_ids(batch: pa.RecordBatch, keys: Sequence[str]) -> list[str | None]:
    """The derived id of every row of ``batch``; None where all keys are null."""
    columns = [_printed(batch.column(k)) for k in keys]
    return [key_id(values) for values in zip(*columns, strict=True)]
