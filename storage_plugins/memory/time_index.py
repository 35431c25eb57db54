"""TimeIndex: one bucket's messages in time order, a heap near now and a timing wheel beyond.

An entry is a (timestamp, slot) pair. Entries due before ``horizon`` sit in
``near``, a heap of Python ints ``timestamp << 32 | slot``: the few that
leases and next_due look at. Later ones wait in *windows*, ``array('q')``
of 8 bytes an entry: fine windows of 2**12 ms inside the coarse window of
2**24 ms (4.7 h) that was last cascaded, coarse windows beyond. Moving the
horizon forward (``advance``) pulls the windows it passes into ``near`` — in
time order, after everything already there, so appending keeps the heap a
heap — and splits the coarse window it enters into fine ones. Millions of
waiting messages thus cost 8 bytes each and no Python object.

Entries are never updated in place: a mutation pushes a new entry and leaves
the old one, which no longer matches its slot's timestamp, state or bucket
(``current``), to be dropped when reached. A reused slot can make an old
entry match again, so one message may have two current entries: readers
count a slot once.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Iterable

import numpy as np

from dejaq.storage_plugins.memory.columns import LIVE, Columns
from dejaq.storage_plugins.memory.types import I64, Mask

SLOT_BITS = 32
SLOT_MASK = (1 << SLOT_BITS) - 1
FINE_BITS = 12
COARSE_BITS = 24
FINE_MASK = (1 << FINE_BITS) - 1
COARSE_MASK = (1 << COARSE_BITS) - 1
FAR_PAST = -(1 << 62)
SMALL_WINDOW = 48  # entries; checked one by one, cheaper than a dozen numpy calls


class TimeIndex:
    """The time-ordered entries of one bucket."""

    __slots__ = (
        "_cascaded",
        "_coarse",
        "_coarse_order",
        "_cols",
        "_exact",
        "_fine",
        "_fine_order",
        "_first",
        "bucket",
        "horizon",
        "near",
    )

    def __init__(self, bucket: int, columns: Columns) -> None:
        self.bucket = bucket
        self._cols = columns
        self.near: list[int] = []  # heap of timestamp << 32 | slot, every timestamp < horizon
        self.horizon = FAR_PAST
        self._cascaded = FAR_PAST >> COARSE_BITS  # the coarse window split into fine ones
        self._fine: dict[int, array[int]] = {}  # (timestamp >> 12) -> offset << 32 | slot
        self._fine_order: list[int] = []  # heap of the keys of _fine
        self._coarse: dict[int, array[int]] = {}  # (timestamp >> 24) -> offset << 32 | slot
        self._coarse_order: list[int] = []
        # No current entry in the windows is earlier than _first (None: there is
        # none at all); when _exact, one is due at _first itself.
        self._first: int | None = None
        self._exact = True

    # -- writing --------------------------------------------------------------

    def push(self, timestamp: int, slot: int) -> None:
        if timestamp < self.horizon:
            heapq.heappush(self.near, timestamp << SLOT_BITS | slot)
            return
        self._window(timestamp).append((timestamp & self._mask(timestamp)) << SLOT_BITS | slot)
        if self._first is None or timestamp < self._first:
            self._first = timestamp

    def push_many(self, timestamp: int, slots: Iterable[int]) -> None:
        """Enter several slots due at one ``timestamp``."""
        if timestamp < self.horizon:
            for s in slots:
                heapq.heappush(self.near, timestamp << SLOT_BITS | s)
            return
        offset = (timestamp & self._mask(timestamp)) << SLOT_BITS
        self._window(timestamp).extend([offset | s for s in slots])
        if self._first is None or timestamp < self._first:
            self._first = timestamp

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
        )
        return ok

    def current_one(self, key: int) -> bool:
        c, slot = self._cols, key & SLOT_MASK
        return bool(
            c.state[slot] == LIVE
            and c.timestamp[slot] == key >> SLOT_BITS
            and c.bucket[slot] == self.bucket
        )

    def bound(self) -> int | None:
        """No current entry is earlier than this (None: there is no entry at all)."""
        return self.near[0] >> SLOT_BITS if self.near else self._first

    def first(self) -> int | None:
        """The earliest timestamp of a current entry, or None."""
        near = self.near
        while near:
            if self.current_one(near[0]):
                return near[0] >> SLOT_BITS
            heapq.heappop(near)
        if not self._exact:
            self._first = self._windows_first()
            self._exact = True
        return self._first

    def advance(self, now: int) -> None:
        """Bring every entry due at or before ``now`` into ``near``."""
        if now < self.horizon:
            return
        top = now >> COARSE_BITS
        pulled = False
        if top > self._cascaded:
            pulled = self._pull_all(self._fine_order, self._fine, FINE_BITS, None)
            pulled |= self._pull_all(self._coarse_order, self._coarse, COARSE_BITS, top - 1)
            if self._coarse_order and self._coarse_order[0] == top:
                heapq.heappop(self._coarse_order)
                self._cascade(top, self._coarse.pop(top))  # same entries, finer windows
            self._cascaded = top
        pulled |= self._pull_all(self._fine_order, self._fine, FINE_BITS, now >> FINE_BITS)
        self.horizon = ((now >> FINE_BITS) + 1) << FINE_BITS
        if pulled:  # the earliest windows are gone: what was earliest is a bound
            self._exact = False

    def due_nodes(self, now: int) -> list[int]:
        """Every entry of ``near`` due at ``now`` (after ``advance(now)``), stale ones too.

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
        return out

    # -- windows --------------------------------------------------------------

    def _mask(self, timestamp: int) -> int:
        return FINE_MASK if timestamp >> COARSE_BITS == self._cascaded else COARSE_MASK

    def _window(self, timestamp: int) -> array[int]:
        if timestamp >> COARSE_BITS == self._cascaded:
            windows, order, index = self._fine, self._fine_order, timestamp >> FINE_BITS
        else:
            windows, order, index = self._coarse, self._coarse_order, timestamp >> COARSE_BITS
        win = windows.get(index)
        if win is None:
            win = windows[index] = array("q")
            heapq.heappush(order, index)
        return win

    def _entries(self, index: int, bits: int, win: array[int]) -> tuple[I64, I64, I64]:
        """A window's keys sorted, with their timestamps and slots."""
        keys = np.sort(np.frombuffer(win, np.int64))
        return keys, (index << bits) + (keys >> SLOT_BITS), keys & SLOT_MASK

    def _pull_all(
        self, order: list[int], windows: dict[int, array[int]], bits: int, last: int | None
    ) -> bool:
        """Move the windows up to index ``last`` (all if None) into ``near``, in order;
        whether there were any."""
        pulled = False
        while order and (last is None or order[0] <= last):
            pulled = True
            index = heapq.heappop(order)
            keys, timestamps, slots = self._entries(index, bits, windows.pop(index))
            keys = keys[self.current(timestamps, slots)]
            base = index << bits << SLOT_BITS
            # Later than every entry of near, and sorted: appended, near stays a heap.
            self.near.extend([base + k for k in keys.tolist()])
        return pulled

    def _cascade(self, index: int, win: array[int]) -> None:
        """Split coarse window ``index`` into the fine windows of its 2**12 ms steps."""
        keys, timestamps, slots = self._entries(index, COARSE_BITS, win)
        keep = self.current(timestamps, slots)
        keys, timestamps = keys[keep], timestamps[keep]
        if not len(keys):
            return
        fine = timestamps >> FINE_BITS
        fine_keys = keys & ((FINE_MASK << SLOT_BITS) | SLOT_MASK)
        starts = np.flatnonzero(np.diff(fine, prepend=fine[0] - 1))
        for start, end in zip(starts.tolist(), [*starts[1:].tolist(), len(keys)], strict=True):
            part = array("q")
            part.frombytes(fine_keys[start:end].tobytes())
            self._fine[int(fine[start])] = part
            self._fine_order.append(int(fine[start]))  # ascending: a heap already

    def _windows_first(self) -> int | None:
        """The earliest current timestamp in the windows; windows with none are dropped."""
        for order, windows, bits in (
            (self._fine_order, self._fine, FINE_BITS),
            (self._coarse_order, self._coarse, COARSE_BITS),
        ):
            while order:
                index = order[0]
                win = windows[index]
                if len(win) <= SMALL_WINDOW:
                    base = index << bits
                    kept = array("q", [k for k in win if self.current_one(k + (base << SLOT_BITS))])
                    if kept:
                        windows[index] = kept
                        return base + (min(kept) >> SLOT_BITS)
                    heapq.heappop(order)
                    del windows[index]
                    continue
                keys = np.frombuffer(win, np.int64)
                timestamps = (index << bits) + (keys >> SLOT_BITS)
                ok = self.current(timestamps, keys & SLOT_MASK)
                if ok.any():
                    if not ok.all():  # drop the stale entries while we are here
                        windows[index] = kept = array("q")
                        kept.frombytes(keys[ok].tobytes())
                    return int(timestamps[ok].min())
                heapq.heappop(order)
                del windows[index]
        return None
