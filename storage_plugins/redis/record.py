"""A message's record as the ``redis://`` layout stores it: one packed value in
the slot's ``records`` hash (``keys``), read and written by the Lua scripts
(``decode`` / ``encode`` in ``helpers.lua``, Redis' ``struct`` library) in the
same layout as here.

``LAYOUT``: little-endian doubles timestamp, version, deliveries, bucket, max
deliveries, expiry, a byte of flags (1: dead, 2: the payload is kept apart), a
double priority and the owner's length (2 bytes); then the lease owner's UTF-8
bytes (none: empty), then the payload, inline when at most ``INLINE_MAX``
bytes. A larger payload is a field of the slot's ``payloads`` hash instead, so
a lease or a move, which rewrites the record, never copies it. Doubles hold
every value exactly (integers below 2**53: millisecond timestamps, priority
ranks of 14 digits, counters) and unpack in one C call in Lua.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dejaq.core.model import NewMessage

LAYOUT = "<ddddddBdH"
_CODEC = struct.Struct(LAYOUT)
SIZE = _CODEC.size  # 59 bytes: the record before its owner and payload
DEAD, APART = 1, 2  # flags
INLINE_MAX = 1024  # larger payloads are kept apart
# The same layout as a numpy record (unaligned, as ``struct`` packs it).
_NEW = np.dtype(
    [
        *[(name, "<f8") for name in ("ts", "v", "n", "b", "md", "ex")],
        ("flags", "u1"),
        ("p", "<f8"),
        ("owner", "<u2"),
    ]
)


@dataclass(frozen=True, slots=True)
class Record:
    """One stored record, decoded; ``payload`` None when it is kept apart."""

    ts: int
    version: int
    deliveries: int
    bucket: int
    max_deliveries: int
    expires_at: int
    dead: bool
    priority: int
    owner: str | None
    payload: bytes | None


def encode(r: Record) -> bytes:
    owner = (r.owner or "").encode()
    flags = (DEAD if r.dead else 0) | (APART if r.payload is None else 0)
    head = _CODEC.pack(
        r.ts,
        r.version,
        r.deliveries,
        r.bucket,
        r.max_deliveries,
        r.expires_at,
        flags,
        r.priority,
        len(owner),
    )
    return head + owner + (r.payload or b"")


def decode(packed: bytes) -> Record:
    ts, v, n, b, md, ex, flags, p, olen = _CODEC.unpack_from(packed)
    owner = packed[SIZE : SIZE + olen].decode()
    payload = None if flags & APART else packed[SIZE + olen :]
    return Record(
        int(ts),
        int(v),
        int(n),
        int(b),
        int(md),
        int(ex),
        bool(flags & DEAD),
        int(p),
        owner or None,
        payload,
    )


def new_records(batch: Sequence[NewMessage]) -> tuple[list[bytes], list[int]]:
    """The records of new messages (version 1, no delivery, no owner), each
    with its payload inline, and the indexes of those whose payload is too
    large for that (kept apart): the headers made in one numpy call, so the
    insert script only stores them."""
    rows = [
        (
            m.timestamp,
            1,
            0,
            m.bucket,
            m.max_deliveries,
            m.expires_at,
            APART if len(m.payload) > INLINE_MAX else 0,
            m.priority,
            0,
        )
        for m in batch
    ]
    heads = np.array(rows, dtype=_NEW).tobytes()
    records, apart = [], []
    for i, m in enumerate(batch):
        head = heads[i * SIZE : (i + 1) * SIZE]
        if len(m.payload) > INLINE_MAX:
            records.append(head)
            apart.append(i)
        else:
            records.append(head + m.payload)
    return records, apart
