"""KeyLanes: a timeline's keyed messages, a lane per key and bucket, and the
heads that name the keys with due messages without reading their backlogs.

A keyed message's entry sits in the ``TimeIndex`` of its (key, bucket), not in
the bucket's own index, which keeps the messages without a key: a lease pass
shares its limit among keys (storage_plugins/base.py, "Fair lease passes")
and takes each key's share from the top of the key's lanes, so a million
messages of one key due at one millisecond are never walked past. A key is
known by a number (``Columns.key_no``; 0: no key), given the first time the
key is seen and kept for the timeline's life (a dead message keeps its
number for a redrive).

``heads`` holds, per bucket, a heap of ``timestamp << 32 | key_no``: for each
lane of the bucket with messages, one entry no later than the lane's earliest
message (``head`` records it). Heads may be early, never late: a message that
leaves leaves its head in place, and the head is corrected when it reaches
the top (``_settle``); a message entering earlier than its lane's head pushes
a new one. A pass pops the due heads of its buckets (``take_due``: one per
lane with due messages, the earliest first, until they name ``limit`` keys) and
gives each lane a fresh head when it is done (``restore``).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Final

import numpy as np

from dejaq.storage_plugins.memory.columns import Columns
from dejaq.storage_plugins.memory.time_index import SLOT_BITS, SLOT_MASK, TimeIndex, push_all
from dejaq.storage_plugins.memory.types import FEW, I64

BUCKET_BITS: Final = 16  # Columns.bucket is 16 bits: a lane is key_no << 16 | bucket
BUCKET_MASK: Final = (1 << BUCKET_BITS) - 1
KEY_MASK: Final = SLOT_MASK  # key numbers are 32 bits, as slots are


class KeyLanes:
    """The lanes of a timeline's keys, found by key and bucket, and their heads."""

    __slots__ = ("_base", "_cols", "head", "heads", "lanes", "names", "numbers")

    def __init__(self, base: list[TimeIndex], columns: Columns) -> None:
        self._base = base  # the buckets' own indexes: a new lane starts where they stand
        self._cols = columns
        self.names: list[str] = [""]  # key number -> key; 0 is no key
        self.numbers: dict[str, int] = {"": 0}
        self.lanes: dict[int, TimeIndex] = {}  # key_no << 16 | bucket -> its lane
        # Per bucket, a heap of timestamp << 32 | key_no (see the module's text).
        self.heads: list[list[int]] = [[] for _ in base]
        # Lane -> the time of its entry in heads (absent: none, or out for a pass).
        self.head: dict[int, int] = {}

    def number(self, keys: Sequence[str]) -> list[int]:
        """The number of each key, new keys numbered as they come."""
        numbers, names = self.numbers, self.names
        out: list[int] = []
        for key in keys:
            n = numbers.get(key)
            if n is None:
                n = numbers[key] = len(names)
                names.append(key)
            out.append(n)
        return out

    # -- writing --------------------------------------------------------------

    def push(self, key_nos: I64, buckets: I64, timestamps: I64, slots: I64) -> None:
        """Enter keyed messages (every ``key_nos`` > 0) in their lanes."""
        ids = (key_nos << BUCKET_BITS) | buckets
        if len(slots) <= FEW:
            for lid, ts, slot in zip(
                ids.tolist(), timestamps.tolist(), slots.tolist(), strict=True
            ):
                self._lane(lid).push(ts, slot)
                self._offer(lid, ts)
            return
        # One push_all over every lane the batch names: a pass's leases go back
        # to one lane a bucket of their key, and a call a lane cost ~5 µs each.
        lids, where = np.unique(ids, return_inverse=True)
        lanes = [self._lane(lid) for lid in lids.tolist()]
        where = where.reshape(-1).astype(np.int64)
        push_all(lanes, where, timestamps, slots)
        earliest = np.full(len(lids), np.iinfo(np.int64).max, np.int64)
        np.minimum.at(earliest, where, timestamps)
        for lid, first in zip(lids.tolist(), earliest.tolist(), strict=True):
            self._offer(lid, first)

    def touch(self, key_nos: I64, buckets: I64, timestamps: I64) -> None:
        """``TimeIndex.touch`` in the lane of each keyed message about to change."""
        ids = ((key_nos << BUCKET_BITS) | buckets).tolist()
        lanes = self.lanes
        for lid, ts in zip(ids, timestamps.tolist(), strict=True):
            lane = lanes.get(lid)  # none for a dead message whose lane emptied
            if lane is not None and ts >= lane.horizon:
                lane.touch(ts)

    def _lane(self, lid: int) -> TimeIndex:
        lane = self.lanes.get(lid)
        if lane is None:
            bucket = lid & BUCKET_MASK
            lane = TimeIndex(bucket, self._cols, False, lid >> BUCKET_BITS)
            lane.follow(self._base[bucket])
            self.lanes[lid] = lane
        return lane

    def _offer(self, lid: int, timestamp: int) -> None:
        """A message of lane ``lid`` is due at ``timestamp``: a head for it if
        the lane has none as early."""
        known = self.head.get(lid)
        if known is None or timestamp < known:
            self.head[lid] = timestamp
            heapq.heappush(
                self.heads[lid & BUCKET_MASK], timestamp << SLOT_BITS | lid >> BUCKET_BITS
            )

    # -- heads ----------------------------------------------------------------

    def _settle(self, bucket: int) -> int | None:
        """Make the top of ``bucket``'s heads exact (its lane's earliest message),
        dropping stale heads and empty lanes on the way; the top, or None."""
        heap, head, lanes = self.heads[bucket], self.head, self.lanes
        while heap:
            top = heap[0]
            ts, lid = top >> SLOT_BITS, (top & KEY_MASK) << BUCKET_BITS | bucket
            if head.get(lid) != ts:  # superseded by an earlier head, or out
                heapq.heappop(heap)
                continue
            first = lanes[lid].first()
            if first is None:  # the lane emptied: forget it
                heapq.heappop(heap)
                del head[lid]
                del lanes[lid]
                continue
            if first == ts:
                return top
            head[lid] = first
            heapq.heapreplace(heap, first << SLOT_BITS | top & KEY_MASK)
        return None

    def first(self, buckets: Sequence[int]) -> int | None:
        """The earliest timestamp of a keyed message of ``buckets``, or None."""
        best: int | None = None
        for b in buckets:
            top = self._settle(b)
            if top is not None and (best is None or top >> SLOT_BITS < best):
                best = top >> SLOT_BITS
        return best

    def take_due(
        self, buckets: Sequence[int], bound: int, most: int, barred: frozenset[int] = frozenset()
    ) -> list[TimeIndex]:
        """The lanes of ``buckets`` with a message due by ``bound``, earliest
        first across the buckets, until they name ``most`` keys not ``barred``
        (a pass of ``most`` gives no more keys one each); their heads are out
        until ``restore``."""
        out: list[TimeIndex] = []
        head, lanes, heads = self.head, self.lanes, self.heads
        keys: set[int] = set()
        tops: list[tuple[int, int]] = []  # (a bucket's exact top head, the bucket)
        for b in buckets:
            top = self._settle(b)
            if top is not None and top >> SLOT_BITS <= bound:
                tops.append((top, b))
        heapq.heapify(tops)
        while tops and len(keys) < most:
            top, b = tops[0]
            heapq.heappop(heads[b])
            key_no = top & KEY_MASK
            lid = key_no << BUCKET_BITS | b
            del head[lid]
            out.append(lanes[lid])
            if key_no not in barred:
                keys.add(key_no)
            top_b = self._settle(b)
            if top_b is not None and top_b >> SLOT_BITS <= bound:
                heapq.heapreplace(tops, (top_b, b))
            else:
                heapq.heappop(tops)
        return out

    def restore(self, taken: list[TimeIndex]) -> None:
        """Give each lane ``take_due`` took a head at its earliest message again
        (or forget it, emptied)."""
        for lane in taken:
            lid = lane.key_no << BUCKET_BITS | lane.bucket
            first = lane.first()
            if first is None:
                if self.lanes.get(lid) is lane:
                    del self.lanes[lid]
            else:
                self._offer(lid, first)

    # -- reading --------------------------------------------------------------

    def loads(self, now: int) -> dict[int, tuple[int, int]]:
        """Key number -> (messages due by ``now``, the earliest of their
        timestamps), for the keys with any: from each lane's due entries."""
        by_key: dict[int, list[I64]] = {}
        for lane in list(self.lanes.values()):
            if now >= lane.horizon:
                lane.advance(now)
            nodes, pending_ts, pending_slots = lane.due(now)
            ts = np.array([k >> SLOT_BITS for k in nodes], np.int64)
            at = np.array([k & SLOT_MASK for k in nodes], np.int64)
            if pending_ts is not None and pending_slots is not None:
                ts, at = np.concatenate([ts, pending_ts]), np.concatenate([at, pending_slots])
            ok = lane.current(ts, at)
            if ok.any():
                by_key.setdefault(lane.key_no, []).append(at[ok])
        c = self._cols
        out: dict[int, tuple[int, int]] = {}
        for key_no, parts in by_key.items():
            due = np.unique(np.concatenate(parts))  # a slot may have two current entries
            out[key_no] = (len(due), int(c.timestamp[due].min()))
        return out
