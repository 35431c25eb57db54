"""Timeline: one topic's messages, and the changes every operation is built from.

It ties the parts together: ``Columns`` (the fields, by slot, with ids and
payloads in ``Blobs``), ``IdTable`` (id -> slot), one ``TimeIndex`` per
bucket and ``Owners``; and it keeps the live / owned / dead counts as
messages change, so ``counts`` never scans.

Messages with a lease owner are also found through ``held``, a plain dict:
only they can be acked, extended or nacked, their number is bounded by the
consumers' credit, not by the timeline, and a dict lookup is several times
cheaper than a probe of the compact table. The millions waiting stay out of it.

A priority topic's available messages sit at their rank, a negative timestamp
(core/priority.py), in ``ranks``: a second TimeIndex per bucket whose horizon
moves only to bring the earliest rank in (``TimeIndex.fill``), apart from the
clock-driven ``lanes`` that hold its not-yet-available messages (timestamps
``>= 0``). A lease pass merges both; ``promote`` takes the due entries of
``lanes`` to ``ranks``. ``ranked`` counts the messages at a rank: all due.

On a timeline, ``lanes`` hold the messages without a key; a keyed message
sits in ``keyed`` (key_lanes.py): in its bucket's index of the keys with few
messages, or in its key's lane of its bucket. A lease pass shares its limit
among the keys with due messages (``select``), and every read by time
(next_due, due, forecast, busiest keys) asks all of them.

The semantic rules (who may settle, when a message dies) are applied by the
caller, ``MemoryStorage``; this module only carries out their verdicts, a
batch of slots at a time.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import repeat
from typing import Final

import numpy as np
import numpy.typing as npt

from dejaq.core import priority as prio
from dejaq.core.errors import InvalidArgument
from dejaq.core.hotpath import kernel
from dejaq.core.model import KIND_PRIORITY, InsertStatus, Message, NewMessage, Topic
from dejaq.storage_plugins.memory.columns import DEAD, LIVE, TOMB, Columns
from dejaq.storage_plugins.memory.graves import Graves
from dejaq.storage_plugins.memory.id_order import IdOrder
from dejaq.storage_plugins.memory.ids import IdTable, hashes_of
from dejaq.storage_plugins.memory.key_lanes import BUCKET_BITS, LIGHT, KeyLanes
from dejaq.storage_plugins.memory.owners import Owners
from dejaq.storage_plugins.memory.time_index import (
    SLOT_BITS,
    SLOT_MASK,
    TimeIndex,
    due_lanes,
    earliest,
    filled_lanes,
    push_all,
)
from dejaq.storage_plugins.memory.types import FEW, I64, U16

Caps = dict[str, int]  # key -> messages a pass may still take of it

ACCEPTED, DUPLICATE = InsertStatus.ACCEPTED, InsertStatus.DUPLICATE
MAX_ID_BYTES: Final = 0xFFFF  # Columns.id_len is 16 bits (the broker allows 256)
MAX_PRIORITY: Final = 0xFFFF  # Columns.priority is 16 bits (the broker allows 999)


# ``_select``'s loop in C (select_kernel.c), or None: the loop below runs.
KERNEL: Final = kernel("dejaq.storage_plugins.memory.select_kernel")
# ``_set_owner``'s pass in C (owner_kernel.c), or None: the arrays below do it.
OWNER_KERNEL: Final = kernel("dejaq.storage_plugins.memory.owner_kernel")

_END_OF_TIME: Final = 1 << 62
# Up to this many slots, ``due`` reads the columns (~3 ms a million), not the index.
DUE_BY_COLUMNS: Final = 2_000_000


class Timeline:
    """One topic: its messages in columns, found by id and by time."""

    def __init__(self, topic: Topic, max_tombs: int = 0) -> None:
        self.topic = topic
        self.max_tombs = max_tombs  # 0: as many as the dedup window makes
        self.cols = Columns()
        self.ids = IdTable(self.cols)
        self.lanes = [TimeIndex(b, self.cols) for b in range(topic.settings.buckets)]
        # A priority topic's ranks (None on a timeline: its lanes hold every timestamp).
        self.ranks: list[TimeIndex] | None = None
        if topic.settings.kind == KIND_PRIORITY:
            self.ranks = [TimeIndex(b, self.cols, True) for b in range(topic.settings.buckets)]
        self.ranked = 0  # live messages at a rank (negative timestamp) in ranks
        # A timeline's keyed messages, by key (a priority topic's stay in its
        # indexes: its passes go by rank, not by key).
        self.keyed = KeyLanes(self.lanes, self.cols)
        self.owners = Owners()
        # Kept as messages change, so counts() never scans every message.
        self.live = 0  # messages not dead
        self.dead = 0
        self.tombs = 0  # tombstones of deleted messages (see ``delete``)
        self.evicted = 0  # tombstones forgotten early, past ``max_tombs``
        self.graves = Graves()  # their slots, oldest first
        # id -> slot of each live message with a lease owner (the lease may have run out)
        self.held: dict[str, int] = {}
        self.id_order = IdOrder()  # of the buckets scanned lately (scan.py)
        # Whether the kernels select and change owners; tests turn it off to compare.
        self.native = KERNEL is not None and OWNER_KERNEL is not None

    # -- finding --------------------------------------------------------------

    def find(self, ids: Sequence[str]) -> I64:
        """The slot of each id (live or dead), -1 where there is none."""
        return self.ids.find(ids, hashes_of(ids))

    def find_one(self, id: str) -> int:
        return int(self.find([id])[0])

    def find_held(self, ids: list[str]) -> I64:
        """Like ``find``, looking in ``held`` first: a settle's ids usually are there."""
        get = self.held.get
        slots = np.array([get(id, -1) for id in ids], np.int64)
        missing = np.flatnonzero(slots < 0)
        if len(missing):
            slots[missing] = self.find([ids[i] for i in missing.tolist()])
        return slots

    @property
    def owned(self) -> int:
        """Live messages with a lease owner."""
        return len(self.held)

    def message(self, slot: int) -> Message:
        c = self.cols
        id, payload = c.record(slot)
        key, headers = c.extras_of(slot)
        return Message(
            id,
            int(c.timestamp[slot]),
            payload,
            int(c.version[slot]),
            int(c.deliveries[slot]),
            self.owners.names[int(c.owner[slot])],
            int(c.bucket[slot]),
            int(c.max_deliveries[slot]),
            int(c.expires_at[slot]),
            bool(c.state[slot] == DEAD),
            int(c.priority[slot]),
            key,
            headers,
        )

    # -- by time --------------------------------------------------------------

    def _lanes(
        self, buckets: tuple[int, ...] | None, lanes: list[TimeIndex] | None = None
    ) -> list[TimeIndex]:
        """The indexes of ``buckets`` among ``lanes`` (the time lanes by default)."""
        every = self.lanes if lanes is None else lanes
        if buckets is None:
            return every
        # One the topic lacks is empty (LeaseRequest already made them distinct).
        return [every[b] for b in buckets if 0 <= b < len(every)]

    def _indexes(self, buckets: tuple[int, ...] | None) -> list[TimeIndex]:
        """Every index of ``buckets`` but the keys' lanes: the ranks (if any),
        the time lanes, and on a timeline those of the keys with few messages."""
        if self.ranks is None:
            if not self.keyed.few and len(self.keyed.names) == 1:
                return self._lanes(buckets)
            return self._lanes(buckets) + self._lanes(buckets, self.keyed.light)
        return self._lanes(buckets, self.ranks) + self._lanes(buckets)

    def _buckets(self, buckets: tuple[int, ...] | None) -> Sequence[int]:
        """The bucket numbers of ``buckets`` the topic has."""
        n = len(self.lanes)
        return range(n) if buckets is None else [b for b in buckets if 0 <= b < n]

    def time_lanes(self) -> list[TimeIndex]:
        """Every index of messages by time (not the ranks): the lanes of the
        messages without a key, and those of the keys."""
        if len(self.keyed.names) == 1:
            return self.lanes
        return self.lanes + self.keyed.light + list(self.keyed.lanes.values())

    def select(
        self, buckets: tuple[int, ...] | None, now: int, limit: int, caps: Caps | None = None
    ) -> tuple[list[int], list[int]]:
        """Up to ``limit`` distinct due messages of ``buckets``: on a timeline,
        shared fairly among their keys (``_fair``), at most ``caps[key]`` of a
        key (each cap is lowered by what is taken); on a priority topic the
        earliest, ranks first (they are all due), keys and caps aside.

        Returns their slots and timestamps, in timestamp order.

        Their entries leave the index: the caller must reschedule, kill or
        remove every slot returned.
        """
        lanes = due_lanes(self._lanes(buckets), now)
        if self.ranks is not None:
            return self._select(filled_lanes(self._lanes(buckets, self.ranks)) + lanes, now, limit)
        if self.keyed.lanes or self.keyed.few:
            return self._fair(lanes, buckets, now, limit, caps)
        if caps is None or "" not in caps:  # no key at all: as before keys came
            return self._select(lanes, now, limit)
        chosen, dues = self._select(lanes, now, min(limit, caps[""]))
        caps[""] -= len(chosen)
        return chosen, dues

    def _fair(
        self,
        lanes: list[TimeIndex],
        buckets: tuple[int, ...] | None,
        now: int,
        limit: int,
        caps: Caps | None,
    ) -> tuple[list[int], list[int]]:
        """``select`` on a timeline with keys: ``lanes`` (those without a key,
        due) count as key 0; max-min fair shares in rounds, the keys due
        earliest first, each share taken from the top of the key's lanes, or
        of its due entries in ``light`` for a key with few messages."""
        keyed = self.keyed
        barred: frozenset[int] = frozenset()  # keys capped at 0 take no place
        if caps:
            barred = frozenset(
                keyed.numbers[k] for k, n in caps.items() if not n and k in keyed.numbers
            )
        taken = keyed.take_due(self._buckets(buckets), now, limit, barred)
        light: dict[int, list[int]] = {}
        if keyed.few:
            light = keyed.take_light(
                due_lanes(self._lanes(buckets, keyed.light), now), now, limit, barred
            )
        groups: dict[int, list[TimeIndex]] = {0: lanes} if lanes else {}
        for lane in due_lanes(taken, now):
            group = groups.get(lane.key_no)
            if group is None:
                groups[lane.key_no] = [lane]
            else:
                group.append(lane)
        names = keyed.names
        left: dict[int, int] = {}
        firsts: dict[int, int] = {}
        for k, group in groups.items():
            cap = None if caps is None else caps.get(names[k])
            left[k] = limit if cap is None else cap
            firsts[k] = min(lane.near[0] for lane in group)
        for k, entries in light.items():  # never a key of groups: light or laned
            cap = None if caps is None else caps.get(names[k])
            left[k] = limit if cap is None else cap
            firsts[k] = entries[0]
        active = sorted((k for k in left if left[k] > 0), key=firsts.__getitem__)
        slots: list[int] = []
        dues: list[int] = []
        seen: set[int] = set()
        at = dict.fromkeys(light, 0)  # a light key's next entry
        remaining = limit
        while remaining > 0 and active:
            # An equal share each (at least one, the earliest keys first when
            # there are more keys than messages left); a key that takes less
            # than it asked has no more, and leaves the rest to the next round.
            share = max(1, remaining // len(active))
            still: list[int] = []
            for k in active:
                want = min(share, left[k], remaining)
                if want <= 0:
                    break
                if k in at:
                    got, times = _take(light[k], at, k, want, seen)
                else:
                    got, times = self._select(groups[k], now, want, seen)
                slots += got
                dues += times
                remaining -= len(got)
                left[k] -= len(got)
                if len(got) == want and left[k] > 0:
                    still.append(k)
            active = still
        keyed.restore(taken)
        if light:
            keyed.give_back([e for k, entries in light.items() for e in entries[at[k] :]])
        if caps is not None:
            for k in left:
                if names[k] in caps:
                    caps[names[k]] = left[k]
        order = sorted(range(len(slots)), key=dues.__getitem__)
        return [slots[i] for i in order], [dues[i] for i in order]

    def promote(self, buckets: tuple[int, ...] | None, now: int, limit: int) -> int:
        """Priority topics: move up to ``limit`` live messages of ``buckets`` due by
        ``now`` (oldest first) from the time lanes to their rank, unowned; how many."""
        chosen, dues = self._select(due_lanes(self._lanes(buckets), now), now, limit)
        if not chosen:
            return 0
        slots = np.array(chosen, np.int64)
        topic = self.topic
        ranks = list(map(prio.rank, repeat(topic), self.cols.priority[slots].tolist(), dues))
        self.reschedule(slots, np.array(ranks, np.int64), None)
        return len(chosen)

    def _select(
        self, lanes: list[TimeIndex], now: int, limit: int, seen: set[int] | None = None
    ) -> tuple[list[int], list[int]]:
        """The earliest ``limit`` due messages of ``lanes`` (all of one key
        number), each advanced (or filled) already: those with an entry due at
        ``near[0]`` (``due_lanes``, ``filled_lanes``). Slots in ``seen`` are
        skipped, and those taken added."""
        bound = (now << SLOT_BITS) | SLOT_MASK
        if seen is None:
            seen = set()
        c = self.cols
        # A reused slot may match an old entry of another key's lane: checked
        # once the topic has keys.
        key_no = lanes[0].key_no if lanes and len(self.keyed.names) > 1 else -1
        slots: list[int] = []
        dues: list[int] = []
        if self.native and KERNEL is not None:
            KERNEL.select(
                lanes,
                bound,
                limit,
                c.state,
                c.timestamp,
                c.bucket,
                c.lane,
                key_no,
                seen,
                slots,
                dues,
            )
            return slots, dues
        # A small heap over the due lane tops merges the buckets in time order.
        tops = [
            (lane.near[0], lane.bucket, lane.near, lane)
            for lane in lanes
            if lane.near and lane.near[0] <= bound
        ]
        heapq.heapify(tops)
        pop, replace = heapq.heappop, heapq.heapreplace
        while tops and len(slots) < limit:
            keys: list[int] = []
            lanes_of: list[int] = []
            for _ in range(limit - len(slots)):
                if not tops:
                    break
                key, b, near, lane = tops[0]
                pop(near)
                keys.append(key)
                lanes_of.append(b)
                if lane.pending or (not near and lane.all_due):
                    lane.fill()
                if near and near[0] <= bound:
                    replace(tops, (near[0], b, near, lane))
                else:
                    pop(tops)
            if len(keys) <= FEW:  # a key's small share: no arrays for so few
                for k, b in zip(keys, lanes_of, strict=True):
                    slot, due = k & SLOT_MASK, k >> SLOT_BITS
                    if (
                        slot not in seen
                        and c.state[slot] == LIVE
                        and c.timestamp[slot] == due
                        and c.bucket[slot] == b
                        and (key_no < 0 or c.lane[slot] == key_no)
                    ):
                        seen.add(slot)
                        slots.append(slot)
                        dues.append(due)
                continue
            # Stale entries are dropped here, a batch at a time.
            ts = np.array([k >> SLOT_BITS for k in keys], np.int64)
            at = np.array([k & SLOT_MASK for k in keys], np.int64)
            ok = (
                (c.state[at] == LIVE)
                & (c.timestamp[at] == ts)
                & (c.bucket[at] == np.array(lanes_of, np.uint16))
            )
            if key_no >= 0:
                ok &= c.lane[at] == key_no
            fresh, times = at[ok].tolist(), ts[ok].tolist()
            distinct = set(fresh)
            if len(distinct) == len(fresh) and not distinct & seen:
                slots += fresh
                dues += times
                seen |= distinct
                continue
            for slot, due in zip(fresh, times, strict=True):
                if slot not in seen:
                    seen.add(slot)
                    slots.append(slot)
                    dues.append(due)
        return slots, dues

    def next_due(self, buckets: tuple[int, ...] | None) -> int | None:
        """The earliest timestamp of a live message of ``buckets``, or None."""
        key = earliest(self._indexes(buckets))
        first = None if key is None else key >> SLOT_BITS
        if not self.keyed.lanes:
            return first
        return _least(first, self.keyed.first(self._buckets(buckets)))

    def head(self) -> tuple[int, int] | None:
        """A priority topic's lowest rank and the priority of a live message at
        it, or None when no message is ranked (or the topic is a timeline)."""
        key = None if self.ranks is None else earliest(self.ranks)
        if key is None:
            return None
        return key >> SLOT_BITS, int(self.cols.priority[key & SLOT_MASK])

    def oldest_unranked(self) -> int | None:
        """The earliest timestamp of a live message that is not a rank, or None."""
        key = earliest(self._lanes(None) if self.ranks is not None else self._indexes(None))
        first = None if key is None else key >> SLOT_BITS
        if not self.keyed.lanes:
            return first
        return _least(first, self.keyed.first(range(len(self.lanes))))

    def due(self, now: int) -> tuple[int, int]:
        """(unleased, lease-expired) live messages with ``timestamp <= now`` in the
        time lanes (a priority topic's ranked messages, all due, are ``ranked``).

        Up to ``DUE_BY_COLUMNS`` slots, one vectorised pass over the columns
        (a few ms); beyond, the lanes' due entries. Walking the entries costs
        about a microsecond each: a million due (a campaign) took 600-800 ms in
        one call, a stall of every delivery of the broker."""
        c = self.cols
        if c.used <= DUE_BY_COLUMNS:
            used = c.used
            ts = c.timestamp[:used]
            # A rank is a negative timestamp: ranked messages are not in the time lanes.
            due = (c.state[:used] == LIVE) & (ts >= 0) & (ts <= now)
            n = int(np.count_nonzero(due))
            expired = int(np.count_nonzero(due & (c.owner[:used] != 0))) if n else 0
            return n - expired, expired
        keys: list[int] = []
        buckets: list[int] = []
        times: list[I64] = []
        slots: list[I64] = []
        pending_buckets: list[int] = []
        bound = (now << SLOT_BITS) | SLOT_MASK
        # A lane's entries are told by bucket and key number in one int.
        for lane in self.time_lanes():
            lid = lane.key_no << BUCKET_BITS | lane.bucket
            if now >= lane.horizon:
                lane.advance(now)
            if not lane.pending and not (lane.near and lane.near[0] <= bound):
                continue  # nothing due here: the usual case, kept cheap
            nodes, pending_ts, pending_slots = lane.due(now)
            keys += nodes
            buckets += [lid] * len(nodes)
            if pending_ts is not None and pending_slots is not None:
                times.append(pending_ts)
                slots.append(pending_slots)
                pending_buckets += [lid] * len(pending_ts)
        ts = np.array([k >> SLOT_BITS for k in keys], np.int64)
        at = np.array([k & SLOT_MASK for k in keys], np.int64)
        if times:  # the pending entries after the heap entries, their buckets in step
            ts, at = np.concatenate([ts, *times]), np.concatenate([at, *slots])
            buckets += pending_buckets
        if not len(at):
            return 0, 0
        buckets_all = np.array(buckets, np.int64)
        c = self.cols
        lane_of = (c.lane[at].astype(np.int64) << BUCKET_BITS) | c.bucket[at]
        ok = (c.state[at] == LIVE) & (c.timestamp[at] == ts) & (lane_of == buckets_all)
        due = np.unique(at[ok])  # a slot may have two current entries
        expired = int(np.count_nonzero(c.owner[due]))
        return len(due) - expired, expired

    # -- changes --------------------------------------------------------------

    def insert(self, messages: Sequence[NewMessage]) -> list[InsertStatus]:
        """Store the messages whose id is new; the first of a repeated id wins."""
        ids, timestamps, payloads, buckets, max_deliveries, expires, priorities, mkeys, mheaders = (
            map(list, zip(*messages, strict=True))
        )
        n = len(ids)
        hashes = hashes_of(ids)
        found, spots = self.ids.find_with_spots(ids, hashes)
        new = found < 0
        if len(set(ids)) != n:
            seen: set[str] = set()
            for i, id in enumerate(ids):
                if id in seen:
                    new[i] = False
                seen.add(id)
        status = [ACCEPTED if fresh else DUPLICATE for fresh in new.tolist()]
        pick = np.flatnonzero(new)
        if not len(pick):
            return status
        if len(pick) < n:
            chosen = pick.tolist()
            ids = [ids[i] for i in chosen]
            payloads = [payloads[i] for i in chosen]
            mkeys = [mkeys[i] for i in chosen]
            mheaders = [mheaders[i] for i in chosen]
            timestamps, buckets, max_deliveries, expires, priorities = (
                [col[i] for i in chosen]
                for col in (timestamps, buckets, max_deliveries, expires, priorities)
            )
        # every check before the first change: a batch is stored whole or not at all
        ts_col, bucket_col, md_col, exp_col, priority_col = _columns(
            timestamps, buckets, max_deliveries, expires, priorities, len(self.lanes)
        )
        keys = _id_bytes(ids)
        slots = self.cols.allocate(len(keys))
        c = self.cols
        c.timestamp[slots] = ts_col
        c.version[slots] = 1
        c.deliveries[slots] = 0
        c.max_deliveries[slots] = md_col
        c.expires_at[slots] = exp_col
        c.owner[slots] = 0
        c.bucket[slots] = bucket_col
        c.priority[slots] = priority_col
        c.state[slots] = LIVE
        c.id_hash[slots] = hashes[pick]
        c.lane[slots] = 0  # keyed.push sets a keyed message's
        if self.ranks is None and any(mkeys):
            c.key_no[slots] = self.keyed.number(mkeys)
        else:
            c.key_no[slots] = 0
        if any(mkeys) or any(mheaders):
            c.store(slots, keys, payloads, [k.encode() for k in mkeys], mheaders)
        else:
            c.store(slots, keys, payloads)
        self.ids.add(hashes[pick], slots, spots[pick])
        self._push(bucket_col, ts_col, slots)
        self.id_order.entered(bucket_col)
        self.live += len(keys)
        return status

    def check(self, messages: Sequence[NewMessage]) -> None:
        """Raise what ``insert`` would refuse ``messages`` for, changing nothing."""
        _columns(
            [m.timestamp for m in messages],
            [m.bucket for m in messages],
            [m.max_deliveries for m in messages],
            [m.expires_at for m in messages],
            [m.priority for m in messages],
            len(self.lanes),
        )
        _id_bytes([m.id for m in messages])

    def replace(self, slots: I64, messages: Sequence[NewMessage]) -> None:
        """Give live messages (``slots``) the fields of ``messages``, their ids in
        order, keeping their deliveries, versions moved on: each is removed and
        stored again, so its indexes, its key's lane (a key may change) and the
        counts follow as for any insert. ``check`` them first."""
        c = self.cols
        versions = c.version[slots] + 1
        deliveries = c.deliveries[slots].copy()
        ids = [m.id for m in messages]
        self.remove(slots, ids)
        self.insert(messages)
        again = self.find(ids)
        c.version[again] = versions
        c.deliveries[again] = deliveries

    def remove(self, slots: I64, ids: list[str] | None = None) -> None:
        """Delete messages (live or dead) with their payloads (``ids``, when the
        caller has them, are theirs in order: they save decoding)."""
        if not len(slots):
            return
        c = self.cols
        state = c.state[slots]
        self.live -= int(np.count_nonzero(state == LIVE))
        self.dead -= int(np.count_nonzero(state == DEAD))
        self._set_owner(slots, None, ids)
        self._touch(slots)
        self.ids.remove(slots)
        c.release(slots)

    def delete(self, slots: I64, ids: list[str], now: int) -> None:
        """Delete live messages (ack, cancel, an at-most-once delivery): with the
        topic's dedup window, each leaves a tombstone deleted at ``now`` (its slot
        keeps only the id, so the id stays taken until ``forget``); without, they
        are removed."""
        if not self.topic.settings.dedup_window_ms:
            self.remove(slots, ids)
            return
        if not len(slots):
            return
        c = self.cols
        self.live -= len(slots)
        self.tombs += len(slots)
        self._set_owner(slots, None, ids)
        self._touch(slots)
        c.state[slots] = TOMB
        c.timestamp[slots] = now
        c.version[slots] += 1
        c.keep_ids(slots, [id.encode() for id in ids])
        self.graves.push(slots)
        if self.max_tombs and self.tombs > self.max_tombs:
            # Past the count bound the oldest go before their window ends.
            self.evicted += self.forget(_END_OF_TIME, self.tombs - self.max_tombs)

    def forget_ids(self, ids: Sequence[str]) -> int:
        """Remove the tombstones of ``ids`` (ids without one are left alone)."""
        if not self.tombs:
            return 0
        found = self.find(ids)
        found = np.unique(found[found >= 0])
        slots = found[self.cols.state[found] == TOMB]
        if len(slots):
            self.tombs -= len(slots)
            self.ids.remove(slots)
            self.cols.release(slots)
        return len(slots)

    def forget(self, deleted_before: int, limit: int) -> int:
        """Remove up to ``limit`` tombstones deleted before ``deleted_before``, the
        oldest first (from the head of ``graves``: no scan of every slot)."""
        c = self.cols
        forgotten = 0
        while forgotten < limit and self.tombs and len(self.graves):
            batch = self.graves.peek(limit - forgotten)
            tomb = c.state[batch] == TOMB  # the others are stale entries
            old = tomb & (c.timestamp[batch] < deleted_before)
            young = np.flatnonzero(tomb & ~old)
            end = int(young[0]) if len(young) else len(batch)
            # unique: a slot forgotten by id, reused and buried again is listed twice
            slots = np.unique(batch[:end][old[:end]])
            self.graves.pop(end)
            if len(slots):
                self.tombs -= len(slots)
                self.ids.remove(slots)
                c.release(slots)
                forgotten += len(slots)
            if end < len(batch):
                break  # the head is not old enough yet
        return forgotten

    def kill(self, slots: I64, now: int, ids: list[str] | None = None) -> None:
        """Move live messages to the dead timeline, dead since ``now``."""
        if not len(slots):
            return
        c = self.cols
        self._set_owner(slots, None, ids)
        self._touch(slots)
        c.state[slots] = DEAD
        c.timestamp[slots] = now
        c.version[slots] += 1
        self.live -= len(slots)
        self.dead += len(slots)

    def reschedule(
        self, slots: I64, at: int | I64, owner: str | None, ids: list[str] | None = None
    ) -> None:
        """Make live messages due at ``at`` (one time, or one per slot) with
        ``owner`` as lease owner; versions move on."""
        if not len(slots):
            return
        c = self.cols
        self._set_owner(slots, owner, ids)
        if self.ranks is None and len(self.keyed.names) > 1:
            light = c.lane[slots] == LIGHT
            if np.count_nonzero(light):
                # Messages of keys with few stay theirs: only their entries move
                # (no leaving and entering ``few`` again, a dict's work each way).
                moving = slots[light]
                times = (
                    at[light] if isinstance(at, np.ndarray) else np.full(len(moving), at, np.int64)
                )
                self.keyed.move_light(c.bucket[moving].astype(np.int64), moving, times)
                c.timestamp[moving] = times
                c.version[moving] += 1
                if light.all():
                    return
                others = ~light
                slots = slots[others]
                if isinstance(at, np.ndarray):
                    at = at[others]
        self._touch(slots)
        c.timestamp[slots] = at
        c.version[slots] += 1
        if isinstance(at, np.ndarray):
            self._push(c.bucket[slots].astype(np.int64), at, slots)
            return
        if self.ranks is None and len(self.keyed.names) > 1:  # keys: to their lanes
            self._push(c.bucket[slots].astype(np.int64), np.full(len(slots), at, np.int64), slots)
            return
        lanes = self.lanes
        if at < 0 and self.ranks is not None:
            lanes = self.ranks
            self.ranked += len(slots)
        # One push each over native ints: cheaper than grouping by bucket for
        # push_many when a batch spreads over many buckets.
        in_bucket: list[int] = c.bucket[slots].tolist()
        moved: list[int] = slots.tolist()
        for i in range(len(moved)):
            lanes[in_bucket[i]].push(at, moved[i])

    def revive(self, slots: I64, at: int) -> None:
        """Put dead messages back, due at ``at``, with their deliveries and expiry reset."""
        if not len(slots):
            return
        c = self.cols
        c.state[slots] = LIVE
        c.deliveries[slots] = 0
        c.expires_at[slots] = 0
        self.dead -= len(slots)
        self.live += len(slots)
        self.reschedule(slots, at, None)

    def _set_owner(self, slots: I64, owner: str | None, ids: list[str] | None) -> None:
        c = self.cols
        number = 0 if owner is None else self.owners.hold(owner, len(slots))
        if self.native and OWNER_KERNEL is not None:
            changed_at, counts = OWNER_KERNEL.swap(
                c.owner, np.ascontiguousarray(slots, np.int64), number, ids, self.held
            )
            self.owners.let_go_counts(counts)
            if not changed_at:  # None: the kernel kept ``held`` itself
                return
            changed = slots[changed_at]
            names = self._ids_of(changed)
            if number:
                self.held.update(zip(names, changed.tolist(), strict=True))
            else:
                for name in names:
                    del self.held[name]
            return
        before = c.owner[slots]
        self.owners.let_go(before)
        c.owner[slots] = number
        changed = np.flatnonzero((before == 0) if number else (before != 0))
        if not len(changed):
            return
        at = changed.tolist()
        names = [ids[i] for i in at] if ids is not None else self._ids_of(slots[changed])
        if number:
            self.held.update(zip(names, slots[changed].tolist(), strict=True))
        else:
            for name in names:
                del self.held[name]

    def _ids_of(self, slots: I64) -> list[str]:
        return [self.cols.record(s)[0] for s in slots.tolist()]

    def _push(self, buckets: I64, timestamps: I64, slots: I64) -> None:
        """Enter live messages in their indexes: a priority topic's ranks apart."""
        if self.ranks is None:
            key_nos = self.cols.key_no[slots] if len(self.keyed.names) > 1 else None
            if key_nos is None or not np.count_nonzero(key_nos):
                push_all(self.lanes, buckets, timestamps, slots)
                return
            plain = key_nos == 0
            if np.count_nonzero(plain):
                push_all(self.lanes, buckets[plain], timestamps[plain], slots[plain])
            keyed = ~plain
            self.keyed.push(
                key_nos[keyed].astype(np.int64), buckets[keyed], timestamps[keyed], slots[keyed]
            )
            return
        at_rank = timestamps < 0
        ranked = int(np.count_nonzero(at_rank))
        if ranked:
            self.ranked += ranked
            push_all(self.ranks, buckets[at_rank], timestamps[at_rank], slots[at_rank])
        if ranked < len(slots):
            waiting = ~at_rank
            push_all(self.lanes, buckets[waiting], timestamps[waiting], slots[waiting])

    def _touch(self, slots: I64) -> None:
        """Tell each index the earliest of its messages about to change (and, on a
        priority topic, count out the live ones leaving a rank)."""
        buckets, timestamps = self.cols.bucket[slots], self.cols.timestamp[slots]
        if self.ranks is None:
            if len(self.keyed.names) > 1:
                tags = self.cols.lane[slots]
                if np.count_nonzero(tags):
                    keyed = tags != 0
                    self.keyed.leave(
                        slots[keyed],
                        tags[keyed].astype(np.int64),
                        buckets[keyed].astype(np.int64),
                        timestamps[keyed],
                    )
                    # In no index until pushed again (a dead message, in none).
                    self.cols.lane[slots[keyed]] = 0
                    plain = ~keyed
                    buckets, timestamps = buckets[plain], timestamps[plain]
            self._touch_lanes(self.lanes, buckets, timestamps)
            return
        at_rank = (timestamps < 0) & (self.cols.state[slots] == LIVE)
        ranked = int(np.count_nonzero(at_rank))
        if ranked:
            self.ranked -= ranked
            self._touch_lanes(self.ranks, buckets[at_rank], timestamps[at_rank])
        if ranked < len(slots):
            waiting = ~at_rank
            self._touch_lanes(self.lanes, buckets[waiting], timestamps[waiting])

    @staticmethod
    def _touch_lanes(lanes: list[TimeIndex], buckets: U16, timestamps: I64) -> None:
        # Each lane is told the earliest of its messages at or past its horizon
        # (those before it sit in near, not the windows). A loop over native
        # ints: compiled, it takes about half the time of the arrays of every
        # lane's horizon and ``np.minimum.at`` on a batch of 150.
        bs: list[int] = buckets.tolist()
        ts: list[int] = timestamps.tolist()
        first: dict[int, int] = {}
        for i in range(len(bs)):
            b, t = bs[i], ts[i]
            if t >= lanes[b].horizon:
                known = first.get(b)
                if known is None or t < known:
                    first[b] = t
        for b, t in first.items():
            lanes[b].touch(t)


def _columns(
    timestamps: list[int],
    buckets: list[int],
    max_deliveries: list[int],
    expires: list[int],
    priorities: list[int],
    n_buckets: int,
) -> tuple[I64, I64, npt.NDArray[np.uint32], I64, U16]:
    """A batch's fields as the columns store them; InvalidArgument for a value
    out of a column's range or a bucket outside the topic's."""
    try:
        ts_col = np.array(timestamps, np.int64)
        bucket_col = np.array(buckets, np.int64)
        md_col = np.array(max_deliveries, np.uint32)
        exp_col = np.array(expires, np.int64)
        priority_col = np.array(priorities, np.uint16)
    except (OverflowError, TypeError, ValueError) as exc:
        raise InvalidArgument(f"a message field is out of range: {exc}") from exc
    if bucket_col.min() < 0 or bucket_col.max() >= n_buckets:
        raise InvalidArgument(f"a bucket is outside the topic's 0..{n_buckets - 1}")
    return ts_col, bucket_col, md_col, exp_col, priority_col


def _id_bytes(ids: list[str]) -> list[bytes]:
    keys = [id.encode() for id in ids]
    if max(map(len, keys)) > MAX_ID_BYTES:
        raise InvalidArgument(f"a message id is longer than {MAX_ID_BYTES} bytes")
    return keys


def _least(a: int | None, b: int | None) -> int | None:
    """The smaller of two optional times."""
    if a is None:
        return b
    return a if b is None or a <= b else b


def _take(
    entries: list[int], at: dict[int, int], k: int, want: int, seen: set[int]
) -> tuple[list[int], list[int]]:
    """Up to ``want`` slots and timestamps from a light key's due ``entries``
    (in time order), from ``at[k]`` on, skipping slots in ``seen``."""
    slots: list[int] = []
    dues: list[int] = []
    i = at[k]
    while i < len(entries) and len(slots) < want:
        key = entries[i]
        i += 1
        slot = key & SLOT_MASK
        if slot not in seen:
            seen.add(slot)
            slots.append(slot)
            dues.append(key >> SLOT_BITS)
    at[k] = i
    return slots, dues
