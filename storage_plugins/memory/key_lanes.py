"""KeyLanes: a timeline's keyed messages, those of a key with few messages in
one shared index a bucket, those of a key with more in a lane per key and
bucket, and the heads that name the laned keys with due messages without
reading their backlogs.

A key is known by a number (``Columns.key_no``; 0: no key), given the first
time the key is seen and kept for the timeline's life (a dead message keeps
its number for a redrive). Where a live keyed message's entry sits is its
``Columns.lane``:

- ``LIGHT``: in ``light``, one ``TimeIndex`` a bucket shared by every key with
  at most ``FEW_A_KEY`` live messages (``few``: key number -> their slots).
  Most keys are such keys when many keys each have a message or two due (a
  user's reminders): they cost a list entry, not an index of their own made
  and dropped with every message. A fair pass walks the due entries of
  ``light`` in time order until they name ``limit`` keys (``take_light``): at
  most ``FEW_A_KEY`` entries a key, so the walk stays bounded by the keys,
  and what the pass does not take goes back (``give_back``).
- the key's number: in the key's lane of its bucket (``lanes``), a
  ``TimeIndex`` of its own. A key moves there, its light messages with it,
  when a message would make it hold more than ``FEW_A_KEY`` (a campaign, a
  flood); it stays until its lanes empty (``laned`` counts them), then its
  next message is light again. A pass takes each laned key's share from the
  top of its lanes (storage_plugins/base.py, "Fair lease passes"), so a
  million messages of one key due at one millisecond are never walked past.

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

from dejaq.storage_plugins.memory.columns import LIVE, Columns
from dejaq.storage_plugins.memory.time_index import SLOT_BITS, SLOT_MASK, TimeIndex, push_all
from dejaq.storage_plugins.memory.types import FEW, I64

BUCKET_BITS: Final = 16  # Columns.bucket is 16 bits: a lane is key_no << 16 | bucket
BUCKET_MASK: Final = (1 << BUCKET_BITS) - 1
KEY_MASK: Final = SLOT_MASK  # key numbers are 32 bits, as slots are
LIGHT: Final = KEY_MASK  # Columns.lane of a message in ``light`` (never a key's number)
# The most live messages a key keeps in ``light``: a pass walks up to this
# many entries of a light key to find its first, so it bounds that walk; a
# key with more is one whose backlog a share may leave behind.
FEW_A_KEY: Final = 8


class KeyLanes:
    """The lanes of a timeline's keys, found by key and bucket, and their heads."""

    __slots__ = (
        "_base",
        "_cols",
        "few",
        "head",
        "heads",
        "laned",
        "lanes",
        "light",
        "names",
        "numbers",
    )

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
        self.laned: dict[int, int] = {}  # key number -> its lanes (absent: none, light)
        # The keys with few messages: one index a bucket, and each key's live slots.
        self.light = [TimeIndex(b, columns, False, LIGHT) for b in range(len(base))]
        self.few: dict[int, list[int]] = {}

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
        """Enter keyed messages (every ``key_nos`` > 0, none in an index now):
        in ``light`` while their key has few, else in their key's lanes."""
        few, laned = self.few, self.laned
        if len(slots) > FEW and all(k in laned for k in np.unique(key_nos).tolist()):
            # Every key laned (a pass's leases of a campaign): no look one by one.
            self._cols.lane[slots] = key_nos
            self._push_lanes(key_nos, buckets, timestamps, slots)
            return
        light: list[int] = []
        heavy: list[int] = []
        moved: list[int] = []  # light slots of keys that move to their lanes
        for i, (k, slot) in enumerate(zip(key_nos.tolist(), slots.tolist(), strict=True)):
            if k in laned:
                heavy.append(i)
                continue
            held = few.get(k)
            if held is None:
                few[k] = [slot]
                light.append(i)
            elif len(held) < FEW_A_KEY:
                held.append(slot)
                light.append(i)
            else:  # one too many: the key and its light messages take lanes
                moved += held
                del few[k]
                laned[k] = 0  # counted as its lanes are made
                heavy.append(i)
        c = self._cols
        if light:
            at = np.array(light, np.int64) if len(light) < len(slots) else None
            if at is None:
                c.lane[slots] = LIGHT
                self._push_light(buckets, timestamps, slots)
                return
            c.lane[slots[at]] = LIGHT
            self._push_light(buckets[at], timestamps[at], slots[at])
        if moved:
            old = np.array(moved, np.int64)
            old_buckets = c.bucket[old].astype(np.int64)
            old_times = c.timestamp[old]
            self._touch_light(old_buckets, old_times)
            c.lane[old] = c.key_no[old]
            self._push_lanes(c.key_no[old].astype(np.int64), old_buckets, old_times, old)
        if heavy:
            at = np.array(heavy, np.int64)
            c.lane[slots[at]] = key_nos[at]
            self._push_lanes(key_nos[at], buckets[at], timestamps[at], slots[at])

    def move_light(self, buckets: I64, slots: I64, timestamps: I64) -> None:
        """Messages in ``light`` (``slots``, not yet changed) are due at
        ``timestamps`` now (a lease's end): their old entries are touched and
        new ones entered, their keys' ``few`` left as it is (the same live
        messages)."""
        self._touch_light(buckets, self._cols.timestamp[slots])
        self._push_light(buckets, timestamps, slots)

    def _push_light(self, buckets: I64, timestamps: I64, slots: I64) -> None:
        """Enter messages in ``light``: those of a pass's leases, all due at its
        lease's end, a ``push_many`` a bucket (cheaper than ``push_all``'s arrays)."""
        if len(slots) > FEW and timestamps.min() == timestamps.max():
            by_bucket: dict[int, list[int]] = {}
            for b, slot in zip(buckets.tolist(), slots.tolist(), strict=True):
                group = by_bucket.get(b)
                if group is None:
                    by_bucket[b] = [slot]
                else:
                    group.append(slot)
            at, light = int(timestamps[0]), self.light
            for b, group in by_bucket.items():
                light[b].push_many(at, group)
            return
        push_all(self.light, buckets, timestamps, slots)

    def _push_lanes(self, key_nos: I64, buckets: I64, timestamps: I64, slots: I64) -> None:
        """Enter messages in their keys' lanes."""
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

    def leave(self, slots: I64, tags: I64, buckets: I64, timestamps: I64) -> None:
        """Keyed messages (``tags``: their ``Columns.lane``, none 0) are about to
        change: out of ``few``, and ``TimeIndex.touch`` in the index of each."""
        light = tags == LIGHT
        if np.count_nonzero(light):
            at = np.flatnonzero(light)
            few = self.few
            for k, slot in zip(
                self._cols.key_no[slots[at]].tolist(), slots[at].tolist(), strict=True
            ):
                held = few.get(k)
                if held is not None and slot in held:
                    held.remove(slot)
                    if not held:
                        del few[k]
            self._touch_light(buckets[at], timestamps[at])
            if light.all():
                return
            laned = np.flatnonzero(~light)
            tags, buckets, timestamps = tags[laned], buckets[laned], timestamps[laned]
        ids = ((tags << BUCKET_BITS) | buckets).tolist()
        lanes = self.lanes
        for lid, ts in zip(ids, timestamps.tolist(), strict=True):
            lane = lanes.get(lid)  # none for a dead message whose lane emptied
            if lane is not None and ts >= lane.horizon:
                lane.touch(ts)

    def _touch_light(self, buckets: I64, timestamps: I64) -> None:
        light = self.light
        for b, ts in zip(buckets.tolist(), timestamps.tolist(), strict=True):
            if ts >= light[b].horizon:
                light[b].touch(ts)

    def _lane(self, lid: int) -> TimeIndex:
        lane = self.lanes.get(lid)
        if lane is None:
            bucket = lid & BUCKET_MASK
            key_no = lid >> BUCKET_BITS
            lane = TimeIndex(bucket, self._cols, False, key_no)
            lane.follow(self._base[bucket])
            self.lanes[lid] = lane
            self.laned[key_no] = self.laned.get(key_no, 0) + 1
        return lane

    def _drop(self, lid: int) -> None:
        """Forget an emptied lane (its key is light again once it has none)."""
        del self.lanes[lid]
        key_no = lid >> BUCKET_BITS
        left = self.laned[key_no] - 1
        if left:
            self.laned[key_no] = left
        else:
            del self.laned[key_no]

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
                self._drop(lid)
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
                    self._drop(lid)
            else:
                self._offer(lid, first)

    # -- reading --------------------------------------------------------------

    def loads(self, now: int) -> dict[int, tuple[int, int]]:
        """Key number -> (messages due by ``now``, the earliest of their
        timestamps), for the keys with any: from the due entries of every
        lane and of ``light`` (told apart by the slot's key there)."""
        by_key: dict[int, list[I64]] = {}
        c = self._cols
        for lane in [*self.light, *self.lanes.values()]:
            if now >= lane.horizon:
                lane.advance(now)
            nodes, pending_ts, pending_slots = lane.due(now)
            ts = np.array([k >> SLOT_BITS for k in nodes], np.int64)
            at = np.array([k & SLOT_MASK for k in nodes], np.int64)
            if pending_ts is not None and pending_slots is not None:
                ts, at = np.concatenate([ts, pending_ts]), np.concatenate([at, pending_slots])
            at = at[lane.current(ts, at)]
            if lane.key_no != LIGHT:
                if len(at):
                    by_key.setdefault(lane.key_no, []).append(at)
                continue
            key_nos = c.key_no[at]
            for k in np.unique(key_nos).tolist():
                by_key.setdefault(k, []).append(at[key_nos == k])
        out: dict[int, tuple[int, int]] = {}
        for key_no, parts in by_key.items():
            due = np.unique(np.concatenate(parts))  # a slot may have two current entries
            out[key_no] = (len(due), int(c.timestamp[due].min()))
        return out

    # -- the light keys -----------------------------------------------------------

    def take_light(
        self, lanes: list[TimeIndex], bound: int, most: int, barred: frozenset[int]
    ) -> dict[int, list[int]]:
        """The due entries of ``lanes`` (of ``light``, advanced to ``bound``) by
        key number, each key's in time order, taken from them earliest first
        until they name ``most`` keys not ``barred``; stale ones are dropped.
        The caller hands back what it does not lease (``give_back``)."""
        limit = (bound << SLOT_BITS) | SLOT_MASK
        tops = [
            (lane.near[0], lane.bucket, lane)
            for lane in lanes
            if lane.near and lane.near[0] <= limit
        ]
        heapq.heapify(tops)
        out: dict[int, list[int]] = {}
        named = 0
        while tops and named < most:
            # As many entries as keys still to name (each names one at most, so
            # the walk stops where one at a time would), then checked together.
            popped: list[int] = []
            buckets: list[int] = []
            for _ in range(most - named):
                if not tops:
                    break
                key, b, lane = tops[0]
                heapq.heappop(lane.near)
                if lane.pending:
                    lane.top_up()
                if lane.near and lane.near[0] <= limit:
                    heapq.heapreplace(tops, (lane.near[0], b, lane))
                else:
                    heapq.heappop(tops)
                popped.append(key)
                buckets.append(b)
            current, key_nos = self._light_keys(popped, buckets)
            for key, ok, k in zip(popped, current, key_nos, strict=True):
                if not ok:  # stale
                    continue
                entries = out.get(k)
                if entries is None:
                    out[k] = [key]
                    if k not in barred:
                        named += 1
                else:
                    entries.append(key)
        return out

    def _light_keys(self, popped: list[int], buckets: list[int]) -> tuple[list[bool], list[int]]:
        """Which entries of ``light`` (of ``buckets``) still describe their
        slot's message, and the key number of each: a column at a time past a few."""
        c = self._cols
        if len(popped) <= FEW:
            current: list[bool] = []
            key_nos: list[int] = []
            for key, b in zip(popped, buckets, strict=True):
                slot = key & SLOT_MASK
                current.append(
                    bool(
                        c.state[slot] == LIVE
                        and c.timestamp[slot] == key >> SLOT_BITS
                        and c.bucket[slot] == b
                        and c.lane[slot] == LIGHT
                    )
                )
                key_nos.append(int(c.key_no[slot]))
            return current, key_nos
        ts = np.array([k >> SLOT_BITS for k in popped], np.int64)
        at = np.array([k & SLOT_MASK for k in popped], np.int64)
        ok = (
            (c.state[at] == LIVE)
            & (c.timestamp[at] == ts)
            & (c.bucket[at] == np.array(buckets, np.uint16))
            & (c.lane[at] == LIGHT)
        )
        return ok.tolist(), c.key_no[at].tolist()

    def give_back(self, entries: list[int]) -> None:
        """Put entries ``take_light`` took back in their buckets' ``light``
        (each due by the horizon its index was advanced to)."""
        light, bucket = self.light, self._cols.bucket
        for key in entries:
            heapq.heappush(light[int(bucket[key & SLOT_MASK])].near, key)
