"""``memory://`` — the in-process backend: fast, bounded only by RAM, not durable.

Per topic, a dict of metadata records and, apart, a dict of payloads; per bucket
a heap of ``(timestamp, version, id)`` entries. Mutations push a new entry and
leave the old one behind: an entry that no longer describes its record
(timestamp, version and bucket) is stale and is dropped when it reaches the
top (lazy deletion). The version alone is not enough: an id deleted and
produced again starts over at version 1. Every method runs without awaiting,
so each call is atomic on the event loop.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from dejaq.core.buckets import Buckets
from dejaq.core.errors import AlreadyExists, DejaqError, NotFound
from dejaq.core.model import (
    Counts,
    Delivery,
    InsertStatus,
    Leases,
    Message,
    NewMessage,
    Settled,
    Topic,
)
from dejaq.storage_plugins.base import LeaseRequest, Outcome, SettleItem, Storage
from dejaq.storage_plugins.rules import check_holder, check_movable, dies_on_lease

Entry = tuple[int, int, str]  # (timestamp, version, id)


class _Record:
    __slots__ = (
        "bucket",
        "dead",
        "deliveries",
        "expires_at",
        "max_deliveries",
        "owner",
        "timestamp",
        "version",
    )

    def __init__(self, m: NewMessage) -> None:
        self.timestamp = m.timestamp
        self.version = 1
        self.deliveries = 0
        self.owner: str | None = None
        self.bucket = m.bucket
        self.max_deliveries = m.max_deliveries
        self.expires_at = m.expires_at
        self.dead = False


@dataclass
class _Timeline:
    topic: Topic
    records: dict[str, _Record] = field(default_factory=dict)
    payloads: dict[str, bytes] = field(default_factory=dict)
    heaps: list[list[Entry]] = field(default_factory=list)
    # Kept as messages change, so counts() never scans every record.
    live: int = 0  # records not dead
    owned: int = 0  # live records with a lease owner (the lease may have run out)
    dead: int = 0

    def add(self, id: str, rec: _Record, payload: bytes) -> None:
        self.records[id] = rec
        self.payloads[id] = payload
        self.live += 1
        self.push(id, rec)

    def set_owner(self, rec: _Record, owner: str | None) -> None:
        if (rec.owner is None) != (owner is None):
            self.owned += 1 if owner is not None else -1
        rec.owner = owner

    def push(self, id: str, rec: _Record) -> None:
        heapq.heappush(self.heaps[rec.bucket], (rec.timestamp, rec.version, id))

    def current(self, entry: Entry, bucket: int) -> _Record | None:
        """The record a heap entry stands for, if the entry is still current."""
        timestamp, version, id = entry
        rec = self.records.get(id)
        if (
            rec is not None
            and rec.version == version
            and rec.timestamp == timestamp
            and rec.bucket == bucket
            and not rec.dead
        ):
            return rec
        return None

    def top(self, bucket: int) -> Entry | None:
        """The live top entry of a bucket heap, dropping stale ones."""
        heap = self.heaps[bucket]
        while heap:
            if self.current(heap[0], bucket) is not None:
                return heap[0]
            heapq.heappop(heap)
        return None

    def due(self, now: int) -> tuple[int, int]:
        """(unleased, lease-expired) live messages with ``timestamp <= now``.

        Walks only heap nodes due by ``now`` (a node's children are never
        earlier), so the cost follows the due backlog, not the timeline size.
        Every live record has exactly one current entry, so none counts twice.
        """
        free = expired = 0
        for bucket, heap in enumerate(self.heaps):
            stack = [0] if heap and heap[0][0] <= now else []
            size = len(heap)
            while stack:
                i = stack.pop()
                rec = self.current(heap[i], bucket)
                if rec is not None:
                    if rec.owner is None:
                        free += 1
                    else:
                        expired += 1
                for child in (2 * i + 1, 2 * i + 2):
                    if child < size and heap[child][0] <= now:
                        stack.append(child)
        return free, expired

    def bucket_ids(self, buckets: Buckets) -> Iterable[int]:
        count = len(self.heaps)
        if buckets is None:
            return range(count)
        # A bucket named twice would be merged twice by _lease (delivering a
        # message twice, or before it is due); one the topic lacks is empty.
        return {b for b in buckets if 0 <= b < count}

    def message(self, id: str, rec: _Record) -> Message:
        return Message(
            id,
            rec.timestamp,
            self.payloads[id],
            rec.version,
            rec.deliveries,
            rec.owner,
            rec.bucket,
            rec.max_deliveries,
            rec.expires_at,
            rec.dead,
        )

    def remove(self, id: str) -> None:
        rec = self.records.pop(id)
        del self.payloads[id]
        if rec.dead:
            self.dead -= 1
        else:
            self.live -= 1
            self.set_owner(rec, None)

    def kill(self, rec: _Record, now: int) -> None:
        self.set_owner(rec, None)
        self.live -= 1
        self.dead += 1
        rec.dead = True
        rec.timestamp = now
        rec.version += 1

    def revive(self, rec: _Record) -> None:
        self.dead -= 1
        self.live += 1
        rec.dead = False


class MemoryStorage(Storage):
    def __init__(self, url: str = "memory://") -> None:
        super().__init__(url)
        self._timelines: dict[str, _Timeline] = {}

    def _tl(self, topic: str) -> _Timeline:
        tl = self._timelines.get(topic)
        if tl is None:
            raise NotFound(f"topic {topic!r} does not exist")
        return tl

    # -- topics ---------------------------------------------------------------

    async def _create_topic(self, topic: Topic) -> None:
        if topic.name in self._timelines:
            raise AlreadyExists(f"topic {topic.name!r} already exists")
        heaps: list[list[Entry]] = [[] for _ in range(topic.settings.buckets)]
        self._timelines[topic.name] = _Timeline(topic, heaps=heaps)

    async def _delete_topic(self, name: str) -> None:
        self._tl(name)
        del self._timelines[name]

    async def _get_topic(self, name: str) -> Topic | None:
        tl = self._timelines.get(name)
        return tl.topic if tl else None

    async def _list_topics(self) -> list[Topic]:
        return [tl.topic for tl in self._timelines.values()]

    # -- messages -------------------------------------------------------------

    async def _insert(self, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]:
        tl = self._tl(topic)
        out = []
        for m in messages:
            if m.id in tl.records:
                out.append(InsertStatus.DUPLICATE)
                continue
            tl.add(m.id, _Record(m), m.payload)
            out.append(InsertStatus.ACCEPTED)
        return out

    async def _lease(self, request: LeaseRequest) -> Leases:
        topic, buckets, now, limit = request.topic, request.buckets, request.now, request.limit
        lease_ms, owner, max_deliveries = request.lease_ms, request.owner, request.max_deliveries
        tl = self._tl(topic)
        until = now + lease_ms
        # A small heap over the due bucket tops merges the buckets in time order.
        tops: list[tuple[int, int]] = []
        for b in tl.bucket_ids(buckets):
            entry = tl.top(b)
            if entry is not None and entry[0] <= now:
                tops.append((entry[0], b))
        heapq.heapify(tops)
        out: list[Delivery] = []
        dead = 0
        while tops and len(out) < limit:
            b = tops[0][1]
            _, _, id = heapq.heappop(tl.heaps[b])
            rec = tl.records[id]  # top() checked it is live
            md = rec.max_deliveries or max_deliveries
            if dies_on_lease(rec.deliveries, md, rec.expires_at, now):
                tl.kill(rec, now)
                dead += 1
            else:
                due = rec.timestamp
                rec.deliveries += 1
                rec.version += 1
                out.append(Delivery(id, due, tl.payloads[id], rec.version, rec.deliveries))
                if md == 1:
                    tl.remove(id)
                else:
                    rec.timestamp = until
                    tl.set_owner(rec, owner)
                    tl.push(id, rec)
            entry = tl.top(b)
            if entry is not None and entry[0] <= now:
                heapq.heapreplace(tops, (entry[0], b))
            else:
                heapq.heappop(tops)
        return Leases(out, until, dead)

    async def _next_due(self, topic: str, buckets: Buckets) -> int | None:
        tl = self._tl(topic)
        best: int | None = None
        for b in tl.bucket_ids(buckets):
            entry = tl.top(b)
            if entry is not None and (best is None or entry[0] < best):
                best = entry[0]
        return best

    def _held(self, tl: _Timeline, id: str, version: int, owner: str) -> _Record | DejaqError:
        rec = tl.records.get(id)
        live = rec is not None and not rec.dead
        err = check_holder(
            id, live, rec.owner if rec else None, rec.version if rec else 0, owner, version
        )
        return err if err is not None else rec  # type: ignore[return-value]

    async def _ack(
        self, topic: str, items: Sequence[SettleItem], owner: str, now: int
    ) -> list[Outcome]:
        tl = self._tl(topic)
        out: list[Outcome] = []
        for id, version in items:
            rec = self._held(tl, id, version, owner)
            if isinstance(rec, DejaqError):
                out.append(rec)
                continue
            tl.remove(id)
            out.append(Settled(id, 0, rec.timestamp))
        return out

    async def _extend(
        self, topic: str, items: Sequence[SettleItem], owner: str, until: int
    ) -> list[Outcome]:
        tl = self._tl(topic)
        out: list[Outcome] = []
        for id, version in items:
            rec = self._held(tl, id, version, owner)
            if isinstance(rec, DejaqError):
                out.append(rec)
                continue
            rec.timestamp = until
            rec.version += 1
            tl.push(id, rec)
            out.append(Settled(id, rec.version, until))
        return out

    async def _nack(
        self, topic: str, items: Sequence[SettleItem], owner: str, at: int, max_deliveries: int
    ) -> list[Outcome]:
        tl = self._tl(topic)
        out: list[Outcome] = []
        for id, version in items:
            rec = self._held(tl, id, version, owner)
            if isinstance(rec, DejaqError):
                out.append(rec)
                continue
            md = rec.max_deliveries or max_deliveries
            if md and rec.deliveries >= md:
                tl.kill(rec, at)
                out.append(Settled(id, 0, at))
                continue
            tl.set_owner(rec, None)
            rec.timestamp = at
            rec.version += 1
            tl.push(id, rec)
            out.append(Settled(id, rec.version, at))
        return out

    def _movable(self, tl: _Timeline, id: str, version: int, now: int) -> _Record:
        rec = tl.records.get(id)
        live = rec is not None and not rec.dead
        err = check_movable(
            id,
            live,
            rec.owner if rec else None,
            rec.timestamp if rec else 0,
            rec.version if rec else 0,
            version,
            now,
        )
        if err is not None:
            raise err
        assert rec is not None
        return rec

    async def _move(self, topic: str, id: str, version: int, at: int, now: int) -> Settled:
        tl = self._tl(topic)
        rec = self._movable(tl, id, version, now)
        tl.set_owner(rec, None)
        rec.timestamp = at
        rec.version += 1
        tl.push(id, rec)
        return Settled(id, rec.version, at)

    async def _cancel(self, topic: str, id: str, version: int, now: int) -> Settled:
        tl = self._tl(topic)
        rec = self._movable(tl, id, version, now)
        tl.remove(id)
        return Settled(id, 0, rec.timestamp)

    async def _get(self, topic: str, id: str) -> Message | None:
        tl = self._tl(topic)
        rec = tl.records.get(id)
        return tl.message(id, rec) if rec is not None else None

    async def _release(self, topic: str, owner: str, now: int) -> int:
        tl = self._timelines.get(topic)
        if tl is None:
            return 0
        released = 0
        for id, rec in tl.records.items():
            if rec.owner == owner and not rec.dead:
                tl.set_owner(rec, None)
                rec.timestamp = now
                rec.version += 1
                tl.push(id, rec)
                released += 1
        return released

    async def _counts(self, topic: str, now: int) -> Counts:
        tl = self._tl(topic)
        free, expired = tl.due(now)
        leased = tl.owned - expired
        return Counts(tl.live - free - expired - leased, free + expired, leased, tl.dead)

    async def _list_dead(self, topic: str, after_id: str, limit: int) -> list[Message]:
        tl = self._tl(topic)
        ids = sorted(id for id, rec in tl.records.items() if rec.dead and id > after_id)
        return [tl.message(id, tl.records[id]) for id in ids[:limit]]

    async def _redrive(self, topic: str, ids: Sequence[str] | None, at: int) -> int:
        tl = self._tl(topic)
        chosen = [i for i, r in tl.records.items() if r.dead] if ids is None else ids
        count = 0
        for id in chosen:
            rec = tl.records.get(id)
            if rec is None or not rec.dead:
                continue
            tl.revive(rec)
            rec.deliveries = 0
            rec.expires_at = 0
            rec.timestamp = at
            rec.version += 1
            tl.push(id, rec)
            count += 1
        return count

    async def _purge_dead(self, topic: str, died_before: int) -> int:
        tl = self._tl(topic)
        doomed = [i for i, r in tl.records.items() if r.dead and r.timestamp < died_before]
        for id in doomed:
            tl.remove(id)
        return len(doomed)
