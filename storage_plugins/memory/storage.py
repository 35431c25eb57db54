"""``memory://`` — the in-process backend: fast, bounded only by RAM, not durable."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Final
from urllib.parse import parse_qsl, urlsplit

import numpy as np

from dejaq.core.buckets import Buckets
from dejaq.core.deliveries import Deliveries
from dejaq.core.errors import AlreadyExists, InvalidArgument, NotFound
from dejaq.core.model import (
    Counts,
    InsertStatus,
    Leases,
    Message,
    NewMessage,
    OnDuplicate,
    Settled,
    Topic,
)
from dejaq.storage_plugins.base import (
    Forecast,
    HandBack,
    Head,
    KeyLoad,
    LeaseRequest,
    Outcome,
    ScanPage,
    SettleItem,
    Storage,
)
from dejaq.storage_plugins.memory import by_due, forecast, scan
from dejaq.storage_plugins.memory.columns import DEAD, LIVE, TOMB, Columns
from dejaq.storage_plugins.memory.timeline import MAX_PRIORITY, OWNER_KERNEL, Timeline
from dejaq.storage_plugins.memory.types import I64
from dejaq.storage_plugins.rules import (
    Fate,
    check_holder,
    check_movable,
    dies_on_nack,
    effective_max_deliveries,
    lease_fate,
    on_duplicate,
)


class MemoryStorage(Storage):
    # A produce frame in one insert: chunks of 250 cost produce ~20% here
    # (batches of 1,000: ~260k -> ~200k msgs/s) for ~1 ms of loop time saved.
    insert_chunk = 0
    lookahead_ms = 0  # no round trip to hide
    census_chunk = 1  # each topic's counts run in the loop: yield after every one

    """Every topic in this process's memory (``memory://``): nothing survives a
    restart, and only one broker process can use it.

    Sized for millions of waiting messages (about 215 bytes each with a
    26-byte id and a 100-byte payload, at 1M and at 10M, measured before the
    2-byte priority column came; a priority topic's backlog at its ranks costs
    the same, tests/storage_plugins/test_memory_priority.py; a tombstone, kept for
    the topic's dedup window after a delete, about 115: its slot's columns,
    67, the id's row in the arena, 32, its place in the id table, ~8, and in
    ``Graves``, 8) and for batches of
    thousands per call. Each topic (``Timeline``) keeps its messages' fields in
    numpy columns indexed by slot (``Columns``), their ids and payloads in a
    byte arena (``Blobs``), id -> slot in a compact hash table (``IdTable``,
    plus a dict of the leased ones) and its time order in a heap and timing
    wheel per bucket (``TimeIndex``): no Python object per waiting message, so
    nothing for the garbage collector to walk. Memory given back by deletes is
    kept for the next inserts, not returned to the system.

    No method awaits, so each call is atomic on the event loop — the only
    concurrency control the contract needs here.
    """

    shared = False  # it lives in one broker process: no cluster can share it

    def __init__(self, url: str = "memory://") -> None:
        super().__init__(url)
        self.max_tombstones = _max_tombstones(url)
        self._timelines: dict[str, Timeline] = {}
        self._identity_ = uuid.uuid4().hex

    async def _identity(self) -> str:
        return self._identity_

    def _tl(self, topic: str) -> Timeline:
        tl = self._timelines.get(topic)
        if tl is None:
            raise NotFound(f"topic {topic!r} does not exist")
        return tl

    # -- topics ---------------------------------------------------------------

    async def _create_topic(self, topic: Topic) -> None:
        if topic.name in self._timelines:
            raise AlreadyExists(f"topic {topic.name!r} already exists")
        self._timelines[topic.name] = Timeline(topic, self.max_tombstones)

    async def _delete_topic(self, name: str) -> None:
        self._tl(name)
        del self._timelines[name]

    async def _update_topic(self, topic: Topic) -> bool:
        tl = self._timelines.get(topic.name)
        if tl is None or tl.topic.created_at_ms != topic.created_at_ms:
            return False
        tl.topic = topic
        return True

    async def _get_topic(self, name: str) -> Topic | None:
        tl = self._timelines.get(name)
        return tl.topic if tl else None

    async def _list_topics(self) -> list[Topic]:
        return [tl.topic for tl in self._timelines.values()]

    # -- messages -------------------------------------------------------------

    async def _insert(self, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]:
        return self._tl(topic).insert(messages)

    async def _debounce(
        self, topic: str, messages: Sequence[NewMessage], mode: OnDuplicate, now: int
    ) -> list[InsertStatus]:
        tl = self._tl(topic)
        c = tl.cols
        slots = tl.find([m.id for m in messages])
        at = np.where(slots >= 0, slots, 0)  # read in one pass each, judged one by one
        found = slots.tolist()
        lives = ((slots >= 0) & (c.state[at] == LIVE)).tolist()
        owners = c.owner[at].tolist()
        stamps = c.timestamp[at].tolist()
        names = tl.owners.names
        status: list[InsertStatus] = []
        fresh: list[NewMessage] = []
        replacing: list[NewMessage] = []
        replaced: list[int] = []
        extending: list[NewMessage] = []
        extended: list[int] = []
        for m, slot, live, number, stamp in zip(
            messages, found, lives, owners, stamps, strict=True
        ):
            if slot < 0:
                status.append(InsertStatus.ACCEPTED)
                fresh.append(m)
                continue
            owner = names[number] if live else None
            verdict = on_duplicate(mode, live, owner, stamp, now)
            status.append(verdict)
            if verdict is InsertStatus.REPLACED:
                replacing.append(m)
                replaced.append(slot)
            elif verdict is InsertStatus.EXTENDED:
                extending.append(m)
                extended.append(slot)
        changed = fresh + replacing + extending
        if changed:
            tl.check(changed)  # before the first change: the batch applies whole or not at all
        if replacing:
            tl.replace(np.array(replaced, np.int64), replacing)
        if extending:
            tl.reschedule(
                np.array(extended, np.int64),
                np.array([m.timestamp for m in extending], np.int64),
                None,
                [m.id for m in extending],
            )
        if fresh:
            tl.insert(fresh)
        return status

    async def _lease(self, request: LeaseRequest) -> Leases:
        tl = self._tl(request.topic)
        now, until, limit = request.now, request.until, request.limit
        # The pass as columns (core/deliveries.py): no object per message.
        ids_out: list[str] = []
        dues_out: list[int] = []
        payloads_out: list[bytes] = []
        versions: list[int] = []
        deliveries: list[int] = []
        priorities: list[int] = []
        keys_out: list[str] | None = None  # None while no message has a key or headers
        headers_out: list[bytes] | None = None
        dead = 0
        caps = dict(request.caps) if request.caps is not None else None  # lowered as taken
        rounds = 0
        while len(ids_out) < limit:
            need = limit - len(ids_out)
            rounds += 1
            chosen, dues = tl.select(request.buckets, request.bound, need, caps)
            slots = np.array(chosen, np.int64)
            c = tl.cols
            fates = _fates(c, slots, dues, request.max_deliveries, now)  # None: all KEEP
            # Dead letters do not count against the limit.
            if fates is not None and Fate.KILL in fates:
                doomed = np.array([f is Fate.KILL for f in fates], np.bool_)
                tl.kill(slots[doomed], now)
                dead += int(doomed.sum())
                slots = slots[~doomed]
                kept = [i for i, f in enumerate(fates) if f is not Fate.KILL]
                dues = [dues[i] for i in kept]
                fates = [fates[i] for i in kept]
            ids, payloads = c.records(slots)
            before = len(ids_out)
            ids_out += ids
            dues_out += dues
            payloads_out += payloads
            versions += (c.version[slots] + 1).tolist()
            deliveries += (c.deliveries[slots] + 1).tolist()
            priorities += c.priority[slots].tolist()
            # count_nonzero, not .any(): one C call, a fifth of the cost on a pass's few slots.
            if np.count_nonzero(c.key_len[slots]) or np.count_nonzero(c.headers_len[slots]):
                # A key by its number (every message of a pass of one key shares
                # its str), the headers read only when some message has them.
                # A priority topic numbers no key: read from the records there.
                if tl.ranks is not None:
                    keys, headers = c.extras(slots)
                else:
                    names = tl.keyed.names
                    keys = [names[k] for k in c.key_no[slots].tolist()]
                    if np.count_nonzero(c.headers_len[slots]):
                        headers = c.extras(slots)[1]
                    else:
                        headers = [b""] * len(keys)
                if keys_out is None or headers_out is None:
                    keys_out, headers_out = [""] * before, [b""] * before
                keys_out += keys
                headers_out += headers
            elif keys_out is not None and headers_out is not None:
                keys_out += [""] * len(ids)
                headers_out += [b""] * len(ids)
            c.deliveries[slots] += 1
            if fates is not None and Fate.DROP in fates:  # at-most-once: gone as it is delivered
                drop = np.array([f is Fate.DROP for f in fates], np.bool_)
                c.version[slots[drop]] += 1
                tl.delete(
                    slots[drop],
                    [i for i, f in zip(ids, fates, strict=True) if f is Fate.DROP],
                    now,
                )
                slots = slots[~drop]
                ids = [i for i, f in zip(ids, fates, strict=True) if f is not Fate.DROP]
            tl.reschedule(slots, until, request.owner, ids)
            if len(chosen) < need:  # nothing more is due
                break
        out = Deliveries(
            ids_out, dues_out, payloads_out, versions, deliveries, priorities, keys_out, headers_out
        )
        if rounds > 1:  # a later round (after dead letters) may take earlier messages
            out = out.in_due_order()
        return Leases(out, until, dead)

    async def _promote(self, topic: str, buckets: Buckets, now: int, limit: int) -> int:
        tl = self._tl(topic)
        if tl.ranks is None:
            raise InvalidArgument(f"topic {topic!r} is a timeline: only a priority topic promotes")
        return tl.promote(_normal(buckets), now, limit)

    async def _next_due(self, topic: str, buckets: Buckets) -> int | None:
        return self._tl(topic).next_due(_normal(buckets))

    def _held(
        self, tl: Timeline, ids: list[str], items: Sequence[SettleItem], owner: str
    ) -> tuple[list[Outcome | None], I64, list[int]]:
        """Which items ``owner`` holds at the quoted version.

        Returns one outcome per item (the refusal, or None where it holds),
        the held slots, and their positions in ``items``.
        """
        if tl.native and OWNER_KERNEL is not None and isinstance(items, list):
            # The usual settle: its consumer holds every message, at the
            # version quoted. Checked in one pass; any other, below.
            number = tl.owners.number(owner)
            c = tl.cols
            slots = np.empty(len(items), np.int64)
            if number is not None and OWNER_KERNEL.holds(
                items, tl.held, number, c.owner, c.state, c.version, slots
            ):
                return [None] * len(items), slots, list(range(len(items)))
        slots = tl.find_held(ids)
        known = slots >= 0
        at = np.where(known, slots, 0)
        c = tl.cols
        out: list[Outcome | None] = list(
            map(
                check_holder,
                ids,
                (known & (c.state[at] == LIVE)).tolist(),
                map(tl.owners.names.__getitem__, c.owner[at].tolist()),
                np.where(known, c.version[at], 0).tolist(),
                repeat(owner),
                [version for _, version in items],
            )
        )
        held = [i for i, err in enumerate(out) if err is None]
        return out, slots[held], held

    @staticmethod
    def _merge(
        out: list[Outcome | None], held: list[int], settled: Iterable[Settled]
    ) -> list[Outcome]:
        """The refusals of ``_held`` with the settled items in their places."""
        if len(held) == len(out):
            return list(settled)
        for i, done in zip(held, settled, strict=True):
            out[i] = done
        return out  # type: ignore[return-value]  # every None was replaced

    @staticmethod
    def _ids(items: Sequence[SettleItem]) -> list[str] | None:
        """The ids of a batch; None when one is named twice (then settle one by one,
        each seeing the one before)."""
        ids = [id for id, _ in items]
        return ids if len(set(ids)) == len(ids) else None

    async def _ack(
        self, topic: str, items: Sequence[SettleItem], owner: str, now: int
    ) -> list[Outcome]:
        tl = self._tl(topic)
        ids = self._ids(items)
        if ids is None:
            return [o for item in items for o in await self._ack(topic, [item], owner, now)]
        out, slots, held = self._held(tl, ids, items, owner)
        settled = map(Settled, [ids[i] for i in held], repeat(0), tl.cols.timestamp[slots].tolist())
        tl.delete(slots, [ids[i] for i in held], now)
        return self._merge(out, held, settled)

    async def _extend(
        self, topic: str, items: Sequence[SettleItem], owner: str, until: int
    ) -> list[Outcome]:
        tl = self._tl(topic)
        ids = self._ids(items)
        if ids is None:
            return [o for item in items for o in await self._extend(topic, [item], owner, until)]
        out, slots, held = self._held(tl, ids, items, owner)
        mine = [ids[i] for i in held]
        tl.reschedule(slots, until, owner, mine)
        return self._merge(
            out, held, map(Settled, mine, tl.cols.version[slots].tolist(), repeat(until))
        )

    async def _nack(
        self, topic: str, items: Sequence[SettleItem], owner: str, at: int, max_deliveries: int
    ) -> list[Outcome]:
        tl = self._tl(topic)
        ids = self._ids(items)
        if ids is None:
            return [
                o
                for item in items
                for o in await self._nack(topic, [item], owner, at, max_deliveries)
            ]
        out, slots, held = self._held(tl, ids, items, owner)
        c = tl.cols
        used_up = np.array(
            [
                dies_on_nack(n, effective_max_deliveries(own, max_deliveries))
                for n, own in zip(
                    c.deliveries[slots].tolist(), c.max_deliveries[slots].tolist(), strict=True
                )
            ],
            np.bool_,
        )
        dying = used_up.tolist()
        tl.kill(slots[used_up], at, [ids[i] for i, d in zip(held, dying, strict=True) if d])
        tl.reschedule(
            slots[~used_up], at, None, [ids[i] for i, d in zip(held, dying, strict=True) if not d]
        )
        versions = [
            0 if dies else v for dies, v in zip(dying, c.version[slots].tolist(), strict=True)
        ]
        return self._merge(out, held, map(Settled, [ids[i] for i in held], versions, repeat(at)))

    async def _hand_back(self, topic: str, items: Sequence[HandBack], owner: str) -> list[Outcome]:
        tl = self._tl(topic)
        pairs = [(id, version) for id, version, _ in items]
        ids = self._ids(pairs)
        if ids is None:
            return [o for item in items for o in await self._hand_back(topic, [item], owner)]
        out, slots, held = self._held(tl, ids, pairs, owner)
        tl.cols.deliveries[slots] -= 1
        by_due: dict[int, list[int]] = {}  # due -> positions in slots
        for k, i in enumerate(held):
            by_due.setdefault(items[i][2], []).append(k)
        for due, ks in by_due.items():
            tl.reschedule(slots[ks], due, None, [ids[held[k]] for k in ks])
        versions = tl.cols.version[slots].tolist()
        dues = [items[i][2] for i in held]
        return self._merge(out, held, map(Settled, [ids[i] for i in held], versions, dues))

    def _movable(self, tl: Timeline, id: str, version: int, now: int) -> I64:
        slot = tl.find_one(id)
        c = tl.cols
        live = slot >= 0 and bool(c.state[slot] == LIVE)
        err = check_movable(
            id,
            live,
            tl.owners.names[int(c.owner[slot])] if live else None,
            int(c.timestamp[slot]) if live else 0,
            int(c.version[slot]) if live else 0,
            version,
            now,
        )
        if err is not None:
            raise err
        return np.array([slot], np.int64)

    async def _move(
        self,
        topic: str,
        id: str,
        version: int,
        at: int,
        now: int,
        payload: bytes | None,
        priority: int | None,
    ) -> Settled:
        tl = self._tl(topic)
        if priority is not None and not 0 <= priority <= MAX_PRIORITY:
            raise InvalidArgument(f"priority {priority} is out of range 0..{MAX_PRIORITY}")
        slot = self._movable(tl, id, version, now)
        tl.reschedule(slot, at, None, [id])
        if payload is not None:
            tl.cols.rewrite(int(slot[0]), payload)
        if priority is not None:
            tl.cols.priority[slot] = priority
        return Settled(id, int(tl.cols.version[slot[0]]), at)

    async def _cancel(self, topic: str, id: str, version: int, now: int) -> Settled:
        tl = self._tl(topic)
        slot = self._movable(tl, id, version, now)
        timestamp = int(tl.cols.timestamp[slot[0]])
        tl.delete(slot, [id], now)
        return Settled(id, 0, timestamp)

    async def _get(self, topic: str, id: str) -> Message | None:
        tl = self._tl(topic)
        slot = tl.find_one(id)
        return tl.message(slot) if slot >= 0 and tl.cols.state[slot] != TOMB else None

    async def _release(self, topic: str, owner: str, now: int) -> int:
        tl = self._timelines.get(topic)
        number = tl.owners.number(owner) if tl else None
        if tl is None or number is None:
            return 0
        ids = list(tl.held)  # every leased message, not every message
        slots = np.array(list(tl.held.values()), np.int64)
        mine = tl.cols.owner[slots] == number
        tl.reschedule(
            slots[mine], now, None, [i for i, m in zip(ids, mine.tolist(), strict=True) if m]
        )
        return int(mine.sum())

    async def _counts(self, topic: str, now: int) -> Counts:
        tl = self._tl(topic)
        free, expired = tl.due(now)
        free += tl.ranked  # a message at a rank is available: due, never owned
        leased = tl.owned - expired
        return Counts(tl.live - free - expired - leased, free + expired, leased, tl.dead)

    async def _oldest(self, topic: Topic, now: int) -> tuple[int | None, Head | None]:
        tl = self._tl(topic.name)
        unranked = tl.oldest_unranked()
        head = tl.head()
        if head is None:
            return unranked, None
        rank, priority = head
        return rank, Head.at(priority, unranked, now)

    async def _forecast(self, topic: str, request: Forecast) -> list[int]:
        tl = self._tl(topic)
        # The time lanes only: a priority topic's ranks are available already.
        return forecast.forecast(tl.time_lanes(), tl.cols, request)

    async def _keys(self, topic: str, now: int, limit: int) -> list[KeyLoad]:
        tl = self._tl(topic)
        if tl.ranks is None:
            return _busiest(tl, now, limit)
        # A priority topic's keyed messages share its indexes: a scan of the columns.
        c = tl.cols
        used = c.used
        keyed = (c.state[:used] == LIVE) & (c.key_len[:used] > 0)
        ts = c.timestamp[:used]
        due = np.flatnonzero(keyed & (ts <= now))
        held = np.flatnonzero(keyed & (ts > now) & (c.owner[:used] != 0))
        loads: dict[str, list[int]] = {}
        due_keys = c.extras(due)[0]
        for key, ts_ in zip(due_keys, ts[due].tolist(), strict=True):
            load = loads.setdefault(key, [0, 0, ts_])
            load[0] += 1
            load[2] = min(load[2], ts_)
        for key in c.extras(held)[0]:
            loads.setdefault(key, [0, 0, 0])[1] += 1
        ranked = sorted(loads.items(), key=lambda kv: (-kv[1][0], kv[0]))[:limit]
        return [KeyLoad(key, d, h, o if d else 0) for key, (d, h, o) in ranked]

    async def _list_dead(self, topic: str, after_id: str, limit: int) -> list[Message]:
        tl = self._tl(topic)
        if not tl.dead:
            return []
        named = ((tl.cols.record(s)[0], s) for s in tl.cols.slots_in(DEAD).tolist())
        page = sorted((id, s) for id, s in named if id > after_id)[:limit]
        return [tl.message(s) for _, s in page]

    async def _scan(self, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
        return scan.scan(self._tl(topic), bucket, after_id, limit)

    async def _by_due(self, topic: str, after: tuple[int, str] | None, limit: int) -> list[Message]:
        return by_due.by_due(self._tl(topic), after, limit)

    async def _redrive(self, topic: str, ids: Sequence[str] | None, at: int) -> int:
        tl = self._tl(topic)
        if ids is None:
            slots = tl.cols.slots_in(DEAD)
        else:
            found = tl.find(ids) if ids else np.zeros(0, np.int64)
            found = np.array(list(dict.fromkeys(found[found >= 0].tolist())), np.int64)
            slots = found[tl.cols.state[found] == DEAD]
        tl.revive(slots, at)
        return len(slots)

    async def _purge_dead(self, topic: str, died_before: int) -> int:
        tl = self._tl(topic)
        if not tl.dead:
            return 0
        slots = tl.cols.slots_in(DEAD)
        slots = slots[tl.cols.timestamp[slots] < died_before]
        tl.remove(slots)
        return len(slots)

    async def _forget_tombstones(self, topic: str, ids: Sequence[str]) -> int:
        return self._tl(topic).forget_ids(ids)

    async def _purge_tombstones(self, topic: str, deleted_before: int, limit: int) -> int:
        return self._tl(topic).forget(deleted_before, limit)


def _busiest(tl: Timeline, now: int, limit: int) -> list[KeyLoad]:
    """A timeline's busiest keys (``Storage.keys``): the due messages from the
    keys' lanes, the held ones from ``held`` (bounded by consumers' credit)."""
    loads = _key_loads(tl.cols, now)
    held: dict[int, int] = {}
    if tl.held:
        c = tl.cols
        slots = np.array(list(tl.held.values()), np.int64)
        key_nos = c.key_no[slots]
        slots = slots[(key_nos != 0) & (c.timestamp[slots] > now)]
        numbers, counts = np.unique(c.key_no[slots], return_counts=True)
        held = dict(zip(numbers.tolist(), counts.tolist(), strict=True))
    names = tl.keyed.names
    rows = [
        KeyLoad(names[k], loads.get(k, (0, 0))[0], held.get(k, 0), loads.get(k, (0, 0))[1])
        for k in loads.keys() | held.keys()
    ]
    rows.sort(key=lambda load: (-load.due, load.key))
    return rows[:limit]


def _key_loads(c: Columns, now: int) -> dict[int, tuple[int, int]]:
    """Key number -> (its live messages due by ``now``, the earliest of their
    timestamps), for the keys with any: one vectorised pass over the columns
    (a few ms a million slots: counts by ``bincount``, earliest by
    ``minimum.at``), where walking the lanes' due entries took ~800 ms for one
    key's million due, a stall of every delivery."""
    used = c.used
    ts = c.timestamp[:used]
    key_no = c.key_no[:used]
    # A mask, not the slots' positions: selecting by it costs a fifth of
    # ``flatnonzero`` and indexing (~11 against ~50 ms a million due).
    due = (c.state[:used] == LIVE) & (key_no != 0) & (ts <= now)
    key_nos = key_no[due]
    if not len(key_nos):
        return {}
    counts = np.bincount(key_nos)
    earliest = np.full(len(counts), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(earliest, key_nos, ts[due])
    keys = np.flatnonzero(counts)
    return {
        k: (n, t)
        for k, n, t in zip(
            keys.tolist(), counts[keys].tolist(), earliest[keys].tolist(), strict=True
        )
    }


def _normal(buckets: Buckets) -> tuple[int, ...] | None:
    """Buckets as the timeline takes them: a sorted tuple of distinct ints, or None."""
    return None if buckets is None else tuple(sorted({int(b) for b in buckets}))


# Tombstones a topic keeps at most on memory://: a bound on memory (about 28 MB a
# topic) that the dedup window alone does not give under a steady load (1,000
# acks a second for 24 h would be 86M), and no column growth once reached.
DEFAULT_MAX_TOMBSTONES: Final = 250_000


def _max_tombstones(url: str) -> int:
    """``memory://?max_tombstones=N`` (0: only the dedup window bounds them)."""
    options = dict(parse_qsl(urlsplit(url).query, keep_blank_values=True))
    unknown = set(options) - {"max_tombstones"}
    if unknown:
        raise InvalidArgument(
            f"unknown memory:// option(s) {sorted(unknown)}: expected max_tombstones"
        )
    raw = options.get("max_tombstones", str(DEFAULT_MAX_TOMBSTONES))
    if not raw.isdigit():
        raise InvalidArgument(f"memory:// max_tombstones must be a whole number, not {raw!r}")
    return int(raw)


def _fates(c: Columns, slots: I64, dues: list[int], topic_max: int, now: int) -> list[Fate] | None:
    """``lease_fate`` of each leased slot, or None when every one is KEEP.

    Only a message with an expiry, or a delivery limit that is 1 or reached,
    can be anything but KEEP: without one among them (the common case) no
    call per message is needed; with one, ``lease_fate`` judges them all.
    """
    own = c.max_deliveries[slots]
    expires = c.expires_at[slots]
    if not topic_max and not np.count_nonzero(own) and not np.count_nonzero(expires):
        return None  # no limit and no expiry: the usual topic, in four numpy calls
    deliveries = c.deliveries[slots]
    limit = np.where(own != 0, own, topic_max) if topic_max else own
    maybe = (expires != 0) | ((limit != 0) & ((limit == 1) | (deliveries >= limit)))
    if not np.count_nonzero(maybe):
        return None
    return list(
        map(
            lease_fate,
            deliveries.tolist(),
            own.tolist(),
            repeat(topic_max),
            expires.tolist(),
            [max(now, due) for due in dues],  # judged when it will be delivered
        )
    )
