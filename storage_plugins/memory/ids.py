"""IdTable: message id -> slot, an open-addressing hash table in one numpy array.

A ``dict`` of a million ids costs ~150 bytes an id (the key string, an int
object per value, the entry); this table costs 4 bytes a position at 25-70%
load, plus the 8-byte ``Columns.id_hash`` of each slot and its 4-byte
position, ``Columns.id_at`` (a delete writes it without probing). Positions hold
``slot + 1`` (0 = empty, -1 = a deleted entry that probes walk past), found by
linear probing from ``hash(id)``. Lookups and inserts probe a whole batch of
ids at once, one numpy step per probe distance, so a batch of a thousand ids
costs a few dozen numpy calls, not a thousand dict operations. Equal hashes
are confirmed against the stored id bytes: two ids with one 64-bit hash are
told apart, if slowly.

The probing loops also exist in C (``id_kernel.c``), one id at a time with no
numpy call a probe distance: a table uses them when the kernel was built and
may run (``core/hotpath.py``), and the numpy code here otherwise, which is
also the reference a differential test holds the kernel to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np

from dejaq.core.hotpath import kernel
from dejaq.storage_plugins.memory.columns import FREE, Columns
from dejaq.storage_plugins.memory.types import I64

EMPTY: Final = 0
DELETED: Final = -1
MAX_LOAD: Final = 0.7  # live + deleted positions over capacity before a rebuild
REBUILD_LOAD: Final = 0.5  # at most this load right after a rebuild
MIN_CAPACITY: Final = 1024
SLOT_SHIFT: Final = 32  # home position << 32 | batch index, sorted as one int64
TAIL: Final = 24  # ids left probing when a Python loop becomes cheaper than another numpy round


# The C loops, or None: not built, or ``core/hotpath.py`` refuses them.
KERNEL: Final = kernel("dejaq.storage_plugins.memory.id_kernel")


def hashes_of(ids: Sequence[str]) -> I64:
    return np.fromiter(map(hash, ids), np.int64, len(ids))


class IdTable:
    """Finds the slot of an id; the ids themselves are stored with ``Columns``."""

    def __init__(self, columns: Columns) -> None:
        self._cols = columns
        self._table = np.zeros(MIN_CAPACITY, np.int32)
        self._live = 0
        self._deleted = 0
        # Whether the C loops run (tests turn them off to compare with the reference).
        self.native = KERNEL is not None

    def __len__(self) -> int:
        return self._live

    @property
    def capacity(self) -> int:
        return len(self._table)

    def find(self, ids: Sequence[str], hashes: I64) -> I64:
        """The slot of each id, or -1 where there is none."""
        return self.find_with_spots(ids, hashes)[0]

    def find_with_spots(self, ids: Sequence[str], hashes: I64) -> tuple[I64, I64]:
        """Like ``find``, with the position where each missing id would go (-1 if
        unknown): ``add`` can take them and skip probing again."""
        slots, spots = self._probe(hashes)
        hit = np.flatnonzero(slots >= 0)
        if not len(hit):
            return slots, spots
        # Confirm each hash match against the stored id.
        keys = list(
            map(str.encode, ids if len(hit) == len(ids) else [ids[i] for i in hit.tolist()])
        )
        same = self._cols.same_ids(slots[hit], keys)
        if not same.all():
            for j in np.flatnonzero(~same).tolist():
                slots[hit[j]] = self._find_one(int(hashes[hit[j]]), keys[j])
        return slots, spots

    def add(self, hashes: I64, slots: I64, spots: I64 | None = None) -> None:
        """Enter ``slots`` under ``hashes``; their ids must not be in the table yet.

        The slots must already be LIVE in the columns, with their ``id_hash``:
        when the table has to grow, it is rebuilt from the columns. ``spots``,
        from ``find_with_spots`` with no change to the table since, saves probing.
        """
        self._live += len(slots)
        if self._live + self._deleted > MAX_LOAD * len(self._table):
            held = np.flatnonzero(self._cols.state[: self._cols.used] != FREE)
            self._table = np.zeros(self._capacity_for(len(held)), np.int32)
            self._deleted = 0
            self._fill(self._cols.id_hash[held], held)
            return
        if self.native and KERNEL is not None:
            missing = spots if spots is not None else np.full(len(slots), -1, np.int64)
            self._deleted -= KERNEL.place(
                self._table,
                self._cols.id_at,
                np.ascontiguousarray(hashes, np.int64),
                np.ascontiguousarray(slots, np.int64),
                np.ascontiguousarray(missing, np.int64),
            )
            return
        if spots is not None and len(slots) > TAIL:  # fewer: _place probes them in Python
            table = self._table
            known = np.flatnonzero(spots >= 0)
            at, want = spots[known], (slots[known] + 1).astype(np.int32)
            before = table[at]
            table[at] = want
            won = table[at] == want  # two new ids may have found one free position
            self._cols.id_at[slots[known[won]]] = at[won]
            self._deleted -= int(np.count_nonzero(before[won] == DELETED))
            rest = np.ones(len(slots), np.bool_)
            rest[known[won]] = False
            hashes, slots = hashes[rest], slots[rest]
        self._place(hashes, slots)

    def remove(self, slots: I64) -> None:
        """Take ``slots`` out (each must be in the table)."""
        self._table[self._cols.id_at[slots]] = DELETED
        self._live -= len(slots)
        self._deleted += len(slots)
        # Deleted positions are reused by inserts and counted in the load add()
        # keeps under MAX_LOAD; a rebuild here only gives memory back, so it
        # waits until it is cheap (few live ids) and worth it (an 8th of the size).
        if self._live < len(self._table) // 16 and len(self._table) > MIN_CAPACITY:
            self._rebuild(self._live)

    def _probe(self, hashes: I64) -> tuple[I64, I64]:
        """Per hash, the first slot entered under an equal hash, or -1; and the
        first free position on the way (-1 where the probe did not pass one)."""
        table, mask, known = self._table, len(self._table) - 1, self._cols.id_hash
        if self.native and KERNEL is not None:
            found, spots = np.empty(len(hashes), np.int64), np.empty(len(hashes), np.int64)
            KERNEL.probe(table, known, np.ascontiguousarray(hashes), found, spots)
            return found, spots
        out = np.full(len(hashes), -1, np.int64)
        spots = np.full(len(hashes), -1, np.int64)
        todo = np.arange(len(hashes))
        pos, want = hashes & mask, hashes
        while len(todo) > TAIL:
            at = table[pos]
            # at - 1 is -1 or -2 at an empty or deleted position: in bounds, masked out.
            match = (at > 0) & (known[at - 1] == want)
            out[todo[match]] = at[match] - 1
            free = (at <= 0) & (spots[todo] < 0)
            spots[todo[free]] = pos[free]
            go = (at != EMPTY) & ~match
            todo, pos, want = todo[go], (pos[go] + 1) & mask, want[go]
        for i, p, w in zip(todo.tolist(), pos.tolist(), want.tolist(), strict=True):
            spot = int(spots[i])
            while (at := int(table[p])) != EMPTY:
                if at > 0 and int(known[at - 1]) == w:
                    out[i] = at - 1
                    break
                if at < 0 and spot < 0:
                    spot = p
                p = (p + 1) & mask
            else:
                spots[i] = p if spot < 0 else spot
                continue
            spots[i] = spot
        return out, spots

    def _find_one(self, h: int, key: bytes) -> int:
        """The slow path after two ids shared a hash: compare every candidate."""
        table, mask, cols = self._table, len(self._table) - 1, self._cols
        pos = h & mask
        while (at := int(table[pos])) != EMPTY:
            slot = at - 1
            if at > 0 and int(cols.id_hash[slot]) == h:
                if cols.same_ids(np.array([slot], np.int64), [key])[0]:
                    return slot
            pos = (pos + 1) & mask
        return -1

    def _place(self, hashes: I64, slots: I64) -> None:
        table, mask, id_at = self._table, len(self._table) - 1, self._cols.id_at
        if self.native and KERNEL is not None:
            self._deleted -= KERNEL.place(
                table,
                id_at,
                np.ascontiguousarray(hashes, np.int64),
                np.ascontiguousarray(slots, np.int64),
                np.full(len(slots), -1, np.int64),
            )
            return
        pos = hashes & mask
        want = (slots + 1).astype(np.int32)
        while len(pos) > TAIL:
            at = table[pos]
            free = np.flatnonzero(at <= 0)
            # Every free candidate writes; where two wrote one position, the
            # one read back won and the other probes on.
            table[pos[free]] = want[free]
            won = np.zeros(len(pos), np.bool_)
            won[free] = table[pos[free]] == want[free]
            id_at[want[won] - 1] = pos[won]
            self._deleted -= int(np.count_nonzero(at[won] == DELETED))
            lost = ~won
            pos, want = (pos[lost] + 1) & mask, want[lost]
        for p, w in zip(pos.tolist(), want.tolist(), strict=True):
            while table[p] > 0:
                p = (p + 1) & mask
            if table[p] == DELETED:
                self._deleted -= 1
            table[p] = w
            id_at[w - 1] = p

    @staticmethod
    def _capacity_for(live: int) -> int:
        cap = MIN_CAPACITY
        while live > REBUILD_LOAD * cap:
            cap *= 2
        return cap

    def _rebuild(self, live: int) -> None:
        """A fresh table sized for ``live`` entries, without deleted positions."""
        entered = self._table[self._table > 0].astype(np.int64) - 1
        self._table = np.zeros(self._capacity_for(live), np.int32)
        self._deleted = 0
        self._fill(self._cols.id_hash[entered], entered)

    def _fill(self, hashes: I64, slots: I64) -> None:
        """Enter many ids into an empty table, laid out by sorting, not probing.

        Linear probing fills positions in order of home position, so with the
        entries sorted by home, entry ``i`` lands at ``max(home[i], final[i-1] + 1)``:
        ``i + running max of (home - i)``. The few that would run past the end
        wrap round through ``_place``.
        """
        cap, n = len(self._table), len(hashes)
        # In place where possible: fresh pages for arrays this size cost more
        # than the arithmetic.
        key = hashes & (cap - 1)
        key <<= SLOT_SHIFT
        rank = np.arange(n)
        key |= rank
        key.sort()
        which = key & ((1 << SLOT_SHIFT) - 1)
        key >>= SLOT_SHIFT  # home positions, ascending
        key -= rank
        np.maximum.accumulate(key, out=key)
        key += rank  # final positions
        fits = key < cap
        if fits.all():
            self._table[key] = slots[which] + 1
            self._cols.id_at[slots[which]] = key
            return
        self._table[key[fits]] = slots[which[fits]] + 1
        self._cols.id_at[slots[which[fits]]] = key[fits]
        spill = which[~fits]
        self._place(hashes[spill], slots[spill])

    def check(self) -> None:
        """Every live or dead slot is entered exactly once (for tests)."""
        entered = np.sort(self._table[self._table > 0].astype(np.int64) - 1)
        held = np.flatnonzero(self._cols.state[: self._cols.used] != FREE)
        assert np.array_equal(entered, held), (entered, held)
        assert (self._table[self._cols.id_at[held]] == held + 1).all()
        assert len(entered) == self._live
        assert np.count_nonzero(self._table == DELETED) == self._deleted
