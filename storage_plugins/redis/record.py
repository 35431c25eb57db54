"""A message's metadata record as the ``redis://`` layout stores it: one packed
value in the slot's ``records`` hash (``keys``), read and written by the Lua
scripts (``decode`` / ``encode`` in ``helpers.lua``, Redis' ``struct``
library) in the same layout as here.

``LAYOUT``: little-endian doubles timestamp, version, deliveries, bucket, max
deliveries, expiry, a byte (1: dead), a double priority, then the lease
owner's UTF-8 bytes to the end (none: empty). Doubles hold every value exactly
(integers below 2**53: millisecond timestamps, priority ranks of 14 digits,
counters), and unpack in one C call in Lua where fields of a Redis hash would
cost a command each. A record is 57 bytes and the owner.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dejaq.core.model import NewMessage

LAYOUT = "<ddddddBd"
_CODEC = struct.Struct(LAYOUT)
SIZE = _CODEC.size  # a record with no owner: every new one
# The same layout as a numpy record (unaligned: 57 bytes, as ``struct`` packs it).
_NEW = np.dtype(
    [
        *[(name, "<f8") for name in ("ts", "v", "n", "b", "md", "ex")],
        ("dead", "u1"),
        ("p", "<f8"),
    ]
)


@dataclass(frozen=True, slots=True)
class Record:
    """One stored record, decoded."""

    ts: int
    version: int
    deliveries: int
    bucket: int
    max_deliveries: int
    expires_at: int
    dead: bool
    priority: int
    owner: str | None


def encode(r: Record) -> bytes:
    head = _CODEC.pack(
        r.ts, r.version, r.deliveries, r.bucket, r.max_deliveries, r.expires_at, r.dead, r.priority
    )
    return head + (r.owner or "").encode()


def decode(packed: bytes) -> Record:
    ts, v, n, b, md, ex, dead, p = _CODEC.unpack_from(packed)
    owner = packed[_CODEC.size :].decode()
    return Record(
        int(ts), int(v), int(n), int(b), int(md), int(ex), dead == 1, int(p), owner or None
    )


def new_records(batch: Sequence[NewMessage]) -> bytes:
    """The records of new messages (version 1, no delivery, no owner), ``SIZE``
    bytes each, end to end: made here in one numpy call, so the insert script
    only cuts them (packing them in Lua cost more than storing them)."""
    rows = [
        (m.timestamp, 1, 0, m.bucket, m.max_deliveries, m.expires_at, 0, m.priority) for m in batch
    ]
    return np.array(rows, dtype=_NEW).tobytes()
