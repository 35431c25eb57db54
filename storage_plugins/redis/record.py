"""A message's record as the ``redis://`` layout stores it: one packed value in
the slot's ``records`` hash (``keys``), read and written by the Lua scripts
(``decode`` / ``encode`` in ``helpers.lua``, Redis' ``struct`` library) in the
same layout as here.

``LAYOUT``: little-endian doubles timestamp, version, deliveries, bucket, max
deliveries, expiry, a byte of flags (1: dead, 2: the payload is kept apart,
4: a key follows the owner, 8: the message sits on its key's lane, 16: it has
headers), a double priority and the owner's length (2 bytes); then the lease
owner's UTF-8 bytes (none: empty), then, with flag 4, the key's length (2
bytes) and UTF-8 bytes, then the payload, inline when at most ``INLINE_MAX``
bytes. Headers are a field of the slot's ``headers`` hash (read only by get,
scan and lease), so a record without a key or headers is as version 2 stored
it. A larger payload is a field of the slot's ``payloads`` hash instead, so
a lease or a move, which rewrites the record, never copies it. Doubles hold
every value exactly (integers below 2**53: millisecond timestamps, priority
ranks of 14 digits, counters) and unpack in one C call in Lua.

A tombstone (``keys``: ``graves``) is a field of the same hash holding only
the time of deletion, packed as ``TOMB`` (``TOMB_SIZE`` bytes, shorter than any
record).
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
DEAD, APART, KEYED, LANED, HEADED = 1, 2, 4, 8, 16  # flags
_KEY_LEN = struct.Struct("<H")
INLINE_MAX = 1024  # larger payloads are kept apart
TOMB = "<d"
TOMB_SIZE = struct.calcsize(TOMB)
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
    key: str = ""
    laned: bool = False  # on its key's lane (``keys.lane``), not the bucket's timeline
    headed: bool = False  # its headers are in the slot's ``headers`` hash


def encode(r: Record) -> bytes:
    owner = (r.owner or "").encode()
    key = r.key.encode()
    flags = (DEAD if r.dead else 0) | (APART if r.payload is None else 0)
    flags |= (KEYED if key else 0) | (LANED if r.laned else 0) | (HEADED if r.headed else 0)
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
    keyed = _KEY_LEN.pack(len(key)) + key if key else b""
    return head + owner + keyed + (r.payload or b"")


def decode(packed: bytes) -> Record:
    ts, v, n, b, md, ex, flags, p, olen = _CODEC.unpack_from(packed)
    owner = packed[SIZE : SIZE + olen].decode()
    at, key = SIZE + olen, ""
    if flags & KEYED:
        (klen,) = _KEY_LEN.unpack_from(packed, at)
        key = packed[at + 2 : at + 2 + klen].decode()
        at += 2 + klen
    payload = None if flags & APART else packed[at:]
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
        key,
        bool(flags & LANED),
        bool(flags & HEADED),
    )


def new_records(batch: Sequence[NewMessage], lanes: bool = True) -> tuple[list[bytes], list[int]]:
    """The records of new messages (version 1, no delivery, no owner), each
    with its payload inline, and the indexes of those whose payload is too
    large for that (kept apart): the fixed parts made in one numpy call, so the
    insert script only stores them. ``lanes``: a keyed message goes on its
    key's lane (a timeline topic; a priority topic takes by rank, keys aside)."""
    rows = [
        (
            m.timestamp,
            1,
            0,
            m.bucket,
            m.max_deliveries,
            m.expires_at,
            (APART if len(m.payload) > INLINE_MAX else 0)
            | (KEYED | (LANED if lanes else 0) if m.key else 0)
            | (HEADED if m.headers else 0),
            m.priority,
            0,
        )
        for m in batch
    ]
    heads = np.array(rows, dtype=_NEW).tobytes()
    records, apart = [], []
    for i, m in enumerate(batch):
        head = heads[i * SIZE : (i + 1) * SIZE]
        if m.key:
            key = m.key.encode()
            head += _KEY_LEN.pack(len(key)) + key
        if len(m.payload) > INLINE_MAX:
            records.append(head)
            apart.append(i)
        else:
            records.append(head + m.payload)
    return records, apart
