"""TimeIndex: one bucket's messages in time order, a heap near now and a timing wheel beyond.

An entry is a (timestamp, slot) pair. Entries due before ``horizon`` sit in
``near``, a heap of Python ints ``timestamp << 32 | slot``: the few that
leases and next_due look at. Later ones wait in the *windows* of a timing
wheel, ``array('q')`` of 8 bytes an entry, on three levels: windows of 4 s
inside the 17-minute window that was last split, those inside the split
3-day window, and 3-day windows beyond. Moving the horizon forward
(``advance``) pulls the windows it passes towards ``near`` and splits the
windows it enters into the level below. A pulled window is sorted once and
waits in ``pending``; ``top_up`` feeds it into ``near`` a chunk at a time, so
that ``near[0]`` is always the earliest entry before the horizon, and a
million messages due at one instant never become a million Python ints at
once. Millions of waiting messages thus cost 8 bytes each and no Python
object, in a few thousand arrays that an insert batch appends to.

Entries are never updated in place: a mutation pushes a new entry and leaves
the old one, which no longer matches its slot's timestamp, state or bucket
(``current``), to be dropped when reached. A reused slot can make an old
entry match again, so one message may have two current entries: readers
count a slot once. An index holds the messages of one lane (``key_no``:
0, a key's number, or ``LIGHT``; key_lanes.py) and checks the slot's
``Columns.lane`` too, so a reused slot, or a message moved to its key's lane,
never shows in another index.

The index of a priority topic's *ranks* (core/priority.py: negative
timestamps, every one due) is a TimeIndex too, made ``all_due``: its horizon
does not follow the clock but moves only when ``near`` runs dry, past the
window of the earliest entry (``fill``), so a backlog of ranked messages waits
in the windows at 8 bytes each, like a timeline's future. The arithmetic holds for
negative timestamps: shifts floor, masks take the low bits, so a key still
orders by (timestamp, slot) and a window holds ``[index << bits, (index + 1)
<< bits)``.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterable
from typing import Final

import numpy as np

from dejaq.storage_plugins.memory.columns import LIVE, Columns
from dejaq.storage_plugins.memory.types import I64, Mask

SLOT_BITS: Final = 32
SLOT_MASK: Final = (1 << SLOT_BITS) - 1
LEVEL_BITS: Final = (12, 20, 28)  # log2 of the window sizes in ms, finest first
TOP: Final = len(LEVEL_BITS) - 1
FAR_PAST: Final = -(1 << 62)
SMALL_WINDOW: Final = 48  # entries; checked one by one, cheaper than a dozen numpy calls
CHUNK = 512  # pulled entries made Python ints at a time
FILL_MASK: Final = (1 << LEVEL_BITS[1]) - 1  # an all_due index pulls level-1 windows whole
# Up to this many entries, ``push_all`` pushes one at a time: compiled, ~0.3 µs
# an entry against the arrays' ~1 µs an entry at a batch of 150 (their fixed
# cost, a few dozen numpy calls and three arrays of every lane's fields).
PUSH_ONE_BY_ONE: Final = 1024


class _Level:
    """The windows of one size: index (timestamp >> bits) -> offset << 32 | slot."""

    __slots__ = ("bits", "mask", "order", "split", "windows")

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.mask = (1 << bits) - 1
        self.windows: dict[int, array[int]] = {}
        self.order: list[int] = []  # heap of the keys of windows
        # Above the finest level: the window whose entries were split into the
        # level below (every window left here is later).
        self.split = FAR_PAST >> bits

    def add(self, index: int, keys: Iterable[int]) -> None:
        win = self.windows.get(index)
        if win is None:
            win = self.windows[index] = array("q")
            heapq.heappush(self.order, index)
        win.extend(keys)


class _Pulled:
    """A pulled window, sorted: keys relative to ``base`` (its start << 32), fed from ``at``."""

    __slots__ = ("at", "base", "keys")

    def __init__(self, base: int, keys: I64) -> None:
        self.base = base
        self.keys = keys
        self.at = 0


class TimeIndex:
    """The time-ordered entries of one bucket."""

    __slots__ = (
        "_cols",
        "_exact",
        "_first",
        "_first_slot",
        "_levels",
        "all_due",
        "bucket",
        "horizon",
        "key_no",
        "near",
        "pending",
    )

    def __init__(
        self, bucket: int, columns: Columns, all_due: bool = False, key_no: int = 0
    ) -> None:
        self.bucket = bucket
        # The lane whose messages this index holds (``Columns.lane``, key_lanes.py):
        # 0 those without a key (every message, on a priority topic), LIGHT the
        # keys with few messages, else one key's number.
        self.key_no = key_no
        self._cols = columns
        self.all_due = all_due  # an index of ranks: see ``fill``
        self.near: list[int] = []  # heap of timestamp << 32 | slot, every timestamp < horizon
        # Pulled windows not yet in near, in order: a few at most, so a list (an
        # empty deque costs 760 bytes, and a timeline has an index a key and bucket).
        self.pending: list[_Pulled] = []
        self.horizon = FAR_PAST
        self._levels = [_Level(bits) for bits in LEVEL_BITS]
        # No current entry in the windows is earlier than _first (None: there is
        # none at all); when _exact, one is due at _first itself: _first_slot's.
        self._first: int | None = None
        self._first_slot = 0
        self._exact = True

    def follow(self, other: TimeIndex) -> None:
        """Start this (empty) index where ``other`` stands, at its horizon and
        in its split windows: a new key's lane (key_lanes.py) then takes its
        first entries as the bucket's index would, not split down level by
        level from the far past on its first advance."""
        self.horizon = other.horizon
        for mine, theirs in zip(self._levels, other._levels, strict=True):
            mine.split = theirs.split

    # -- writing --------------------------------------------------------------

    def push(self, timestamp: int, slot: int) -> None:
        """Enter one slot due at ``timestamp``: ``push_many`` without its list."""
        if timestamp < self.horizon:
            heapq.heappush(self.near, timestamp << SLOT_BITS | slot)
            return
        level = self._level_of(timestamp)
        index = timestamp >> level.bits
        win = level.windows.get(index)
        if win is None:
            win = level.windows[index] = array("q")
            heapq.heappush(level.order, index)
        win.append((timestamp & level.mask) << SLOT_BITS | slot)
        if self._first is None or timestamp < self._first:
            self._first = timestamp
            self._first_slot = slot

    def push_many(self, timestamp: int, slots: Iterable[int]) -> None:
        """Enter slots due at ``timestamp``."""
        if timestamp < self.horizon:
            for s in slots:
                heapq.heappush(self.near, timestamp << SLOT_BITS | s)
            return
        level = self._level_of(timestamp)
        offset = (timestamp & level.mask) << SLOT_BITS
        keys = [offset | s for s in slots]
        level.add(timestamp >> level.bits, keys)
        if keys and (self._first is None or timestamp < self._first):
            self._first = timestamp
            self._first_slot = keys[0] & SLOT_MASK

    def touch(self, timestamp: int) -> None:
        """A message of this bucket due at ``timestamp`` changes: if its entry may be
        the earliest in the windows, their earliest time is only a bound now."""
        first = self._first
        if first is not None and self.horizon <= timestamp <= first:
            self._exact = False

    # -- reading --------------------------------------------------------------

    def current(self, timestamps: I64, slots: I64) -> Mask:
        """Which entries still describe their slot's message."""
        c = self._cols
        ok: Mask = (
            (c.state[slots] == LIVE)
            & (c.timestamp[slots] == timestamps)
            & (c.bucket[slots] == self.bucket)
            & (c.lane[slots] == self.key_no)
        )
        return ok

    def current_one(self, key: int) -> bool:
        c, slot = self._cols, key & SLOT_MASK
        return bool(
            c.state[slot] == LIVE
            and c.timestamp[slot] == key >> SLOT_BITS
            and c.bucket[slot] == self.bucket
            and c.lane[slot] == self.key_no
        )

    def bound(self) -> int | None:
        """No current entry is earlier than this (None: there is no entry at all)."""
        if self.pending:  # before near[0] unless topped up
            head = self.pending[0]
            pending = (head.base + int(head.keys[head.at])) >> SLOT_BITS
            return min(pending, self.near[0] >> SLOT_BITS) if self.near else pending
        if self.near:  # before every window
            return self.near[0] >> SLOT_BITS
        return self._first

    def top_up(self) -> None:
        """Feed ``near`` from ``pending`` until ``near[0]`` is the earliest entry
        before the horizon (callers look at ``near[0]`` only after this)."""
        pending, near = self.pending, self.near
        if not pending:
            return
        run = pending[0]
        if near and near[0] <= run.base + int(run.keys[run.at]):
            return
        chunk = run.keys[run.at : run.at + CHUNK].tolist()
        run.at += len(chunk)
        if run.at == len(run.keys):
            del pending[0]
        base = run.base
        if near:
            for k in chunk:
                heapq.heappush(near, base + k)
        else:  # sorted: a heap already
            near.extend([base + k for k in chunk])

    def fill(self) -> None:
        """``top_up``; on an ``all_due`` index whose ``near`` ran dry, also move the
        horizon past the level-1 window of the earliest entry of the windows, so
        that ``near[0]`` is the earliest entry of the whole index (``near`` is
        left empty only when the index is)."""
        self.top_up()
        if not self.all_due:
            return
        while not self.near:
            first = self.first()  # exact: the earliest current entry of the windows
            if first is None:
                return
            # Pull the (17-minute) window of that entry whole: ranks spread
            # thin over many small windows are taken in one step, not each
            # alone (first >= horizon, so advance moves).
            self.advance(first | FILL_MASK)
            self.top_up()

    def first(self) -> int | None:
        """The earliest timestamp of a current entry, or None."""
        key = self.first_key()
        return None if key is None else key >> SLOT_BITS

    def first_key(self) -> int | None:
        """The key (``timestamp << 32 | slot``) of a current entry at the earliest
        timestamp, or None."""
        near = self.near
        while True:
            self.top_up()
            if not near:
                break
            if self.current_one(near[0]):
                return near[0]
            heapq.heappop(near)
        if not self._exact:
            self._first, self._first_slot = self._windows_first() or (None, 0)
            self._exact = True
        return None if self._first is None else self._first << SLOT_BITS | self._first_slot

    def advance(self, now: int) -> None:
        """Bring every entry due at or before ``now`` into ``near``."""
        if now < self.horizon:
            return
        levels = self._levels
        pulled = False
        for k in range(TOP, 0, -1):
            level = levels[k]
            target = now >> level.bits
            if target > level.split:
                # Everything below lies in an earlier window of this level: all due.
                for below in levels[:k]:
                    pulled |= self._pull(below, None)
                if self.all_due and now & level.mask == level.mask:
                    # ``fill`` takes the target window whole: nothing to split.
                    pulled |= self._pull(level, target)
                    level.split = target
                    continue
                pulled |= self._pull(level, target - 1)
                if level.order and level.order[0] == target:
                    heapq.heappop(level.order)
                    self._split(level, levels[k - 1], target, level.windows.pop(target))
                level.split = target
        finest = levels[0]
        pulled |= self._pull(finest, now >> finest.bits)
        self.horizon = ((now >> finest.bits) + 1) << finest.bits
        if pulled:  # the earliest windows are gone: what was earliest is a bound
            self._exact = False

    def due(self, now: int) -> tuple[list[int], I64 | None, I64 | None]:
        """Every entry due at ``now`` (after ``advance(now)``), stale ones too: those
        of ``near`` as keys, those still pending as (timestamps, slots).

        Walks only heap nodes due by ``now`` (a node's children are never
        earlier), so the cost follows the due backlog, not the bucket's size.
        """
        heap, limit = self.near, (now << SLOT_BITS) | SLOT_MASK
        out: list[int] = []
        stack = [0] if heap and heap[0] <= limit else []
        size = len(heap)
        while stack:
            i = stack.pop()
            out.append(heap[i])
            for child in (2 * i + 1, 2 * i + 2):
                if child < size and heap[child] <= limit:
                    stack.append(child)
        times: list[I64] = []
        slots: list[I64] = []
        for run in self.pending:
            keys = run.keys[run.at :]
            ts = (run.base >> SLOT_BITS) + (keys >> SLOT_BITS)
            keep = ts <= now
            times.append(ts[keep])
            slots.append(keys[keep] & SLOT_MASK)
        if not times:
            return out, None, None
        return out, np.concatenate(times), np.concatenate(slots)

    def between(self, start: int, end: int) -> tuple[I64, I64]:
        """The entries with ``start <= timestamp < end``, stale ones too, as
        (timestamps, slots), unordered; the index is left as it is. Reads the
        heap near the horizon, the pulled windows by binary search, and only
        the windows that overlap the range: the cost follows the entries in
        the range, not the bucket's size."""
        times: list[I64] = []
        slots: list[I64] = []
        if self.near and start < self.horizon:
            lo, hi = start << SLOT_BITS, end << SLOT_BITS  # keys pass 64 bits: Python ints
            inside = [k for k in self.near if lo <= k < hi]
            times.append(np.array([k >> SLOT_BITS for k in inside], np.int64))
            slots.append(np.array([k & SLOT_MASK for k in inside], np.int64))
        for run, lo_at, hi_at in self._pending_between(start, end):
            part = run.keys[lo_at:hi_at]
            times.append((run.base >> SLOT_BITS) + (part >> SLOT_BITS))
            slots.append(part & SLOT_MASK)
        for level, index, win in self._windows_between(start, end):
            keys = np.frombuffer(win, np.int64)
            ts = (index << level.bits) + (keys >> SLOT_BITS)
            if index << level.bits < start or (index + 1) << level.bits > end:
                keep = (ts >= start) & (ts < end)  # a window the range cuts
                ts, keys = ts[keep], keys[keep]
            times.append(ts)
            slots.append(keys & SLOT_MASK)
        if not times:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return np.concatenate(times), np.concatenate(slots)

    def entries_between(self, start: int, end: int) -> int:
        """How many entries ``between`` would read at most (stale ones too),
        from the sizes of the heap, the pulled runs and the windows alone."""
        count = len(self.near) if start < self.horizon else 0
        count += sum(hi_at - lo_at for _, lo_at, hi_at in self._pending_between(start, end))
        return count + sum(len(win) for _, _, win in self._windows_between(start, end))

    def _pending_between(self, start: int, end: int) -> list[tuple[_Pulled, int, int]]:
        """Each pulled run with the range of its keys due in ``[start, end)``."""
        out = []
        for run in self.pending:
            # Keys are relative to the run's base, within one window: bounds clamped to it.
            bounds = [min(max((t << SLOT_BITS) - run.base, 0), 1 << 62) for t in (start, end)]
            lo_at, hi_at = np.searchsorted(run.keys[run.at :], bounds).tolist()
            out.append((run, run.at + lo_at, run.at + hi_at))
        return out

    def _windows_between(self, start: int, end: int) -> list[tuple[_Level, int, array[int]]]:
        """Each window (level, index, entries) that overlaps ``[start, end)``."""
        out = []
        for level in self._levels:
            first, last = start >> level.bits, (end - 1) >> level.bits
            windows = level.windows
            if last - first + 1 <= len(windows):
                indexes = [i for i in range(first, last + 1) if i in windows]
            else:
                indexes = [i for i in windows if first <= i <= last]
            out += [(level, i, windows[i]) for i in indexes]
        return out

    # -- windows --------------------------------------------------------------

    def _level_of(self, timestamp: int) -> _Level:
        """Where an entry at or after the horizon goes: the finest level whose
        windows lie in the split window containing it."""
        levels = self._levels
        for k in range(TOP):
            up = levels[k + 1]
            if timestamp >> up.bits == up.split:
                return levels[k]
        return levels[TOP]

    def _entries(self, level: _Level, index: int, win: array[int]) -> tuple[I64, I64, I64]:
        """A window's keys sorted, with their timestamps and slots."""
        keys = np.sort(np.frombuffer(win, np.int64))
        return keys, (index << level.bits) + (keys >> SLOT_BITS), keys & SLOT_MASK

    def _pull(self, level: _Level, last: int | None) -> bool:
        """Move the windows up to index ``last`` (all if None) into ``near``, in order;
        whether there were any."""
        pulled = False
        order = level.order
        while order and (last is None or order[0] <= last):
            pulled = True
            index = heapq.heappop(order)
            win = level.windows.pop(index)
            base = index << level.bits << SLOT_BITS
            if len(win) <= SMALL_WINDOW and not self.pending:
                # A few entries (a key's lane): checked one by one, no arrays.
                current = self.current_one
                self.near.extend(sorted([base + k for k in win if current(base + k)]))
                continue
            keys, timestamps, slots = self._entries(level, index, win)
            keys = keys[self.current(timestamps, slots)]
            if not self.pending and len(keys) <= CHUNK:
                # Later than every entry of near, and sorted: appended, near stays a heap.
                self.near.extend([base + k for k in keys.tolist()])
            elif len(keys):
                self.pending.append(_Pulled(base, keys))
        return pulled

    def _split(self, level: _Level, below: _Level, index: int, win: array[int]) -> None:
        """Spread window ``index`` of ``level`` over the (empty) windows of ``below``."""
        if len(win) <= SMALL_WINDOW:  # a few entries (a key's lane): no arrays
            base = index << level.bits << SLOT_BITS
            for key in sorted([base + k for k in win if self.current_one(base + k)]):
                ts = key >> SLOT_BITS
                below.add(ts >> below.bits, ((ts & below.mask) << SLOT_BITS | key & SLOT_MASK,))
            return
        _, timestamps, slots = self._entries(level, index, win)
        keep = self.current(timestamps, slots)
        timestamps, slots = timestamps[keep], slots[keep]
        if not len(slots):
            return
        parts = timestamps >> below.bits
        sub_keys = ((timestamps & below.mask) << SLOT_BITS) | slots
        starts = np.flatnonzero(np.diff(parts, prepend=parts[0] - 1))
        for start, end in zip(starts.tolist(), [*starts[1:].tolist(), len(parts)], strict=True):
            part = array("q")
            part.frombytes(sub_keys[start:end].tobytes())
            below.windows[int(parts[start])] = part
            below.order.append(int(parts[start]))  # ascending: a heap already

    def _windows_first(self) -> tuple[int, int] | None:
        """The earliest current timestamp in the windows and a slot due then;
        windows with none are dropped."""
        for level in self._levels:  # finer levels hold earlier times
            order, windows = level.order, level.windows
            while order:
                index = order[0]
                win = windows[index]
                base = index << level.bits
                if len(win) <= SMALL_WINDOW:
                    kept = array("q", [k for k in win if self.current_one(k + (base << SLOT_BITS))])
                    if kept:
                        windows[index] = kept
                        least = min(kept)
                        return base + (least >> SLOT_BITS), least & SLOT_MASK
                else:
                    keys = np.frombuffer(win, np.int64)
                    timestamps = base + (keys >> SLOT_BITS)
                    ok = self.current(timestamps, keys & SLOT_MASK)
                    if np.count_nonzero(ok):
                        if not ok.all():  # drop the stale entries while we are here
                            windows[index] = kept = array("q")
                            kept.frombytes(keys[ok].tobytes())
                        at = int(np.argmin(np.where(ok, timestamps, np.iinfo(np.int64).max)))
                        return int(timestamps[at]), int(keys[at]) & SLOT_MASK
                heapq.heappop(order)
                del windows[index]
        return None


def push_all(lanes: list[TimeIndex], buckets: I64, timestamps: I64, slots: I64) -> None:
    """Enter a batch of entries of many buckets: ``TimeIndex.push`` for each, with
    the arithmetic done a column at a time and only the appends left per entry
    (up to ``PUSH_ONE_BY_ONE`` entries, a plain ``push`` each costs less than the arrays)."""
    if len(slots) <= PUSH_ONE_BY_ONE:
        push_each(lanes, buckets, timestamps, slots)
    else:
        push_arrays(lanes, buckets, timestamps, slots)


def push_each(lanes: list[TimeIndex], buckets: I64, timestamps: I64, slots: I64) -> None:
    """``push_all`` one entry at a time, over native ints."""
    one_bucket: list[int] = buckets.tolist()
    one_time: list[int] = timestamps.tolist()
    one_slot: list[int] = slots.tolist()
    for i in range(len(one_slot)):
        lanes[one_bucket[i]].push(one_time[i], one_slot[i])


def push_arrays(lanes: list[TimeIndex], buckets: I64, timestamps: I64, slots: I64) -> None:
    """``push_all`` a column at a time: only the appends left per entry."""
    horizon = np.array([lane.horizon for lane in lanes], np.int64)[buckets]
    near = timestamps < horizon
    if np.count_nonzero(near):
        at = np.flatnonzero(near)
        for b, ts, slot in zip(
            buckets[at].tolist(), timestamps[at].tolist(), slots[at].tolist(), strict=True
        ):
            heapq.heappush(lanes[b].near, ts << SLOT_BITS | slot)
        if near.all():
            return
        far = np.flatnonzero(~near)
        buckets, timestamps, slots = buckets[far], timestamps[far], slots[far]
    level = np.full(len(buckets), TOP, np.int64)
    for k in range(TOP - 1, -1, -1):  # finer levels win
        split = np.array([lane._levels[k + 1].split for lane in lanes], np.int64)[buckets]
        level[(timestamps >> LEVEL_BITS[k + 1]) == split] = k
    bits = np.array(LEVEL_BITS, np.int64)[level]
    index = timestamps >> bits
    keys = ((timestamps & ((1 << bits) - 1)) << SLOT_BITS) | slots
    order = np.lexsort((level, buckets))  # one run per (bucket, level)
    buckets, level, index, keys = buckets[order], level[order], index[order], keys[order]
    group = (buckets << 2) | level
    starts = np.flatnonzero(np.diff(group, prepend=-1))
    ends = [*starts[1:].tolist(), len(group)]
    earliest = np.full(len(lanes), np.iinfo(np.int64).max, np.int64)
    timestamps, slots = timestamps[order], slots[order]
    np.minimum.at(earliest, buckets, timestamps)
    first_slot = np.zeros(len(lanes), np.int64)  # a slot due at each bucket's earliest
    at_first = np.flatnonzero(timestamps == earliest[buckets])
    first_slot[buckets[at_first]] = slots[at_first]
    index_list, key_list = index.tolist(), keys.tolist()
    for start, end in zip(starts.tolist(), ends, strict=True):
        lane = lanes[int(buckets[start])]
        lv = lane._levels[int(level[start])]
        get, windows, heap = lv.windows.get, lv.windows, lv.order
        for i, key in zip(index_list[start:end], key_list[start:end], strict=True):
            win = get(i)
            if win is None:
                win = windows[i] = array("q")
                heapq.heappush(heap, i)
            win.append(key)
    for b in np.unique(buckets).tolist():
        lane, t = lanes[b], int(earliest[b])
        if lane._first is None or t < lane._first:
            lane._first = t
            lane._first_slot = int(first_slot[b])


# -- over many lanes --------------------------------------------------------------
# A pass looks at every bucket it serves, most of them empty or not due: these
# loops test a lane's fields before calling into it, which keeps a pass over 64
# quiet buckets a few microseconds instead of a few hundred method calls.


def due_lanes(lanes: list[TimeIndex], now: int) -> list[TimeIndex]:
    """Advance each of ``lanes`` to ``now`` and top it up; those whose ``near[0]``
    is due by ``now``."""
    bound = (now << SLOT_BITS) | SLOT_MASK
    out: list[TimeIndex] = []
    for lane in lanes:
        if now >= lane.horizon:
            lane.advance(now)
        if lane.pending:
            lane.top_up()
        near = lane.near
        if near and near[0] <= bound:
            out.append(lane)
    return out


def filled_lanes(lanes: list[TimeIndex]) -> list[TimeIndex]:
    """``fill`` each of ``lanes`` (``all_due`` indexes); those with an entry."""
    out: list[TimeIndex] = []
    for lane in lanes:
        if lane.pending or (not lane.near and lane._first is not None):
            lane.fill()
        if lane.near:
            out.append(lane)
    return out


def earliest(lanes: list[TimeIndex]) -> int | None:
    """The key of a current entry at the earliest timestamp of ``lanes``, or None."""
    # Each lane knows a bound cheaply; only lanes whose bound beats the best
    # exact time found so far are asked for theirs.
    bounds: list[tuple[int, int]] = []
    for k, lane in enumerate(lanes):
        if lane.near or lane.pending or lane._first is not None:  # else: empty
            b = lane.bound()
            if b is not None:
                bounds.append((b, k))
    bounds.sort()
    best: int | None = None
    for bound, k in bounds:
        if best is not None and bound >= best >> SLOT_BITS:
            break
        first = lanes[k].first_key()
        if first is not None and (best is None or first < best):  # keys order by time
            best = first
    return best
