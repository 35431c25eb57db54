"""The memory backend beyond the shared contract: its counts are kept as
messages change (a random walk checks them against a full scan after every
step), and its columnar index agrees with a naive model, operation by
operation, through walks that jump across the time wheel's windows. Its parts
alone (id table, byte arena, time index) are in ``test_memory_parts.py``."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pytest

from dejaq.core import priority as prio
from dejaq.core.errors import DejaqError, InvalidArgument, NotFound
from dejaq.core.model import (
    KIND_PRIORITY,
    Counts,
    LeasedMessage,
    Message,
    NewMessage,
    Settled,
    State,
    Topic,
    TopicSettings,
)
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.memory import MemoryStorage, time_index
from dejaq.storage_plugins.memory.columns import DEAD, LIVE, TOMB
from dejaq.storage_plugins.memory.time_index import LEVEL_BITS
from dejaq.storage_plugins.memory.timeline import Timeline
from dejaq.storage_plugins.rules import Fate, lease_fate
from tests.storage_plugins.conformance import givens as g

T = "walk"
BUCKETS = 4


async def scanned(storage: MemoryStorage, ids: list[str], now: int) -> Counts:
    """Counts the slow way: every message read back and classified."""
    tally = dict.fromkeys(State, 0)
    for mid in ids:
        try:
            tally[(await storage.get(T, mid)).state(now)] += 1
        except NotFound:
            pass
    return Counts(tally[State.WAITING], tally[State.DUE], tally[State.LEASED], tally[State.DEAD])


async def test_counts_match_a_full_scan_through_a_random_walk() -> None:
    rng = random.Random(7)
    storage = MemoryStorage()
    await storage.create_topic(Topic(T, TopicSettings(buckets=BUCKETS, dedup_window_ms=100)))
    now = 1_000
    ids = [f"m{i}" for i in range(40)]
    for _ in range(1_500):
        now += rng.choice((0, 1, 5, 50, 5_000))
        mid = rng.choice(ids)
        owner = rng.choice(("a", "b"))
        op = rng.randrange(12)
        try:
            if op == 0:
                md = rng.choice((0, 0, 1, 2))
                ts = now + rng.randint(-20, 200)
                await storage.insert(T, [NewMessage(mid, ts, b"p", hash(mid) % BUCKETS, md)])
            elif op == 1:
                await storage.lease(
                    LeaseRequest.of(T, None, now, rng.randint(1, 5), rng.randint(10, 100), owner, 3)
                )
            elif op in (2, 3, 4):
                msg = await storage.get(T, mid)
                item = [(mid, msg.version)]
                if op == 2:
                    await storage.ack(T, item, owner, now)
                elif op == 3:
                    await storage.nack(T, item, owner, now + rng.randint(0, 50), 3)
                else:
                    await storage.extend(T, item, owner, now + rng.randint(1, 80))
            elif op in (5, 6):
                msg = await storage.get(T, mid)
                if op == 5:
                    await storage.move(T, mid, msg.version, now + rng.randint(-10, 100), now)
                else:
                    await storage.cancel(T, mid, msg.version, now)
            elif op == 7:
                await storage.release(T, owner, now)
            elif op == 8:
                await storage.redrive(T, rng.choice((None, [mid])), now + rng.randint(0, 30))
            elif op == 9:
                await storage.purge_dead(T, now - rng.randint(0, 100))
            elif op == 10:  # tombstones leave the counts alone, and free their ids
                await storage.purge_tombstones(T, now - 100, rng.randint(1, 5))
            else:
                await storage.lease(
                    LeaseRequest.of(T, {rng.randrange(BUCKETS)}, now, 3, 30, owner, 0)
                )
        except DejaqError:
            pass  # refused mutations change nothing; the counts must agree still
        probe = now + rng.choice((0, 10, 100))
        assert await storage.counts(T, probe) == await scanned(storage, ids, probe)


# -- against a model ------------------------------------------------------------


@dataclass
class Rec:
    ts: int
    payload: bytes
    bucket: int
    md: int
    exp: int
    version: int = 1
    deliveries: int = 0
    owner: str | None = None
    dead: bool = False
    priority: int = 0


class Model:
    """The contract the slow, obvious way: a dict, scanned and sorted."""

    def __init__(self, window_ms: int = 0) -> None:
        self.recs: dict[str, Rec] = {}
        self.window_ms = window_ms
        self.tombs: dict[str, int] = {}  # id -> deleted at, with a dedup window

    def delete(self, mid: str, now: int) -> None:
        """Ack, cancel, at-most-once delivery: gone, leaving a tombstone with a window."""
        del self.recs[mid]
        if self.window_ms:
            self.tombs[mid] = now

    def taken(self, mid: str) -> bool:
        return mid in self.recs or mid in self.tombs

    def message(self, mid: str) -> Message:
        r = self.recs[mid]
        return Message(
            mid,
            r.ts,
            r.payload,
            r.version,
            r.deliveries,
            r.owner,
            r.bucket,
            r.md,
            r.exp,
            r.dead,
            r.priority,
        )

    def due(self, buckets: tuple[int, ...] | None, now: int) -> list[str]:
        live = [
            (r.ts, mid)
            for mid, r in self.recs.items()
            if not r.dead and r.ts <= now and (buckets is None or r.bucket in buckets)
        ]
        return [mid for _, mid in sorted(live)]

    def next_due(self, buckets: tuple[int, ...] | None) -> int | None:
        live = [
            r.ts
            for r in self.recs.values()
            if not r.dead and (buckets is None or r.bucket in buckets)
        ]
        return min(live, default=None)

    def kill(self, mid: str, now: int) -> None:
        r = self.recs[mid]
        r.dead, r.owner, r.ts, r.version = True, None, now, r.version + 1

    def deliver(self, mid: str, request: LeaseRequest) -> LeasedMessage:
        r = self.recs[mid]
        due = r.ts
        r.deliveries += 1
        r.version += 1
        delivery = LeasedMessage(mid, due, r.payload, r.version, r.deliveries, r.priority)
        if (r.md or request.max_deliveries) == 1:  # at-most-once
            self.delete(mid, request.now)
        else:
            r.ts, r.owner = request.until, request.owner
        return delivery


def lease_checked(
    model: Model, request: LeaseRequest, got: list[LeasedMessage], died: set[str]
) -> None:
    """Check a lease against the model, then apply the same choice to it.

    Messages due at one instant may be taken in any order, so where the limit
    cuts through such a group the backend's choice is checked, not predicted.
    """
    due = model.due(request.buckets, request.now)
    taken = {d.id for d in got} | died
    assert [d.timestamp for d in got] == sorted(d.timestamp for d in got)
    cut = max((model.recs[m].ts for m in taken), default=None)
    for mid in due:
        r = model.recs[mid]
        if cut is not None and r.ts < cut:
            assert mid in taken, f"{mid} due at {r.ts} was skipped for one due at {cut}"
        fate = lease_fate(r.deliveries, r.md, request.max_deliveries, r.exp, request.now)
        if mid in taken:
            assert (mid in died) == (fate is Fate.KILL)
    if len(got) < request.limit:
        assert taken == set(due)
    expected = []
    for mid in due:
        if mid in died:
            model.kill(mid, request.now)
        elif mid in taken:
            expected.append(model.deliver(mid, request))
    assert sorted(got) == sorted(expected)


@pytest.mark.long
@pytest.mark.parametrize("chunk", [time_index.CHUNK, 2], ids=["chunk", "tiny-chunks"])
async def test_the_columnar_index_agrees_with_a_model_through_long_walks(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Tiny chunks make every pulled window wait in pending, as a burst's would.
    monkeypatch.setattr(time_index, "CHUNK", chunk)
    for seed in range(6):
        await walk_against_the_model(seed, steps=700)


@pytest.mark.long
async def test_tombstones_agree_with_a_model_through_long_walks() -> None:
    for seed in range(6):
        await walk_against_the_model(seed, steps=700, window_ms=1 << 24)


@pytest.mark.long
@pytest.mark.parametrize("chunk", [time_index.CHUNK, 2], ids=["chunk", "tiny-chunks"])
async def test_a_priority_topics_ranks_agree_with_a_model_through_long_walks(
    chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time_index, "CHUNK", chunk)
    for seed in range(4):
        await walk_against_the_model(seed, steps=700, ranked=True)


async def walk_against_the_model(
    seed: int, steps: int, window_ms: int = 0, ranked: bool = False
) -> None:
    """Random operations on storage and model alike. Without a dedup window the
    walk reuses the ids of deleted messages at once; with one, after a purge.
    ``ranked``: on a priority topic, with messages inserted and moved at their
    rank, and promote among the operations."""
    rng = random.Random(seed)
    storage, model = MemoryStorage(), Model(window_ms)
    settings = TopicSettings(buckets=BUCKETS, dedup_window_ms=window_ms)
    now = rng.randrange(1 << 40)
    if ranked:
        aging = rng.choice((0, 1, 1_000, 1 << 20))
        settings = TopicSettings(
            buckets=BUCKETS,
            dedup_window_ms=window_ms,
            kind=KIND_PRIORITY,
            priorities=10,
            aging_ms=aging,
        )
    topic = Topic(T, settings, created_at_ms=now)
    await storage.create_topic(topic)
    ids = [f"id-{i}-é" if i % 7 == 0 else f"id-{i}" for i in range(60)]
    sizes = [1 << bits for bits in LEVEL_BITS]  # every level's window, and more
    jumps = (0, 1, 40, *sizes, 3 * sizes[-1], 1 << 33)
    spreads = (50, *sizes, 1 << 34)
    for _ in range(steps):
        now += rng.choice(jumps) + rng.randrange(3)
        owner = rng.choice(("a", "b", "c"))
        some = rng.sample(ids, rng.randint(1, 8))
        buckets = rng.choice((None, (0,), (1, 3), (0, 1, 2, 3)))
        op = rng.randrange(14 if ranked else 12)
        if op >= 12:
            await promote_checked(storage, model, topic, buckets, now, rng.choice((1, 3, 1_000)))
        elif op <= 1:
            batch = [
                NewMessage(
                    m,
                    max(0, now + rng.randint(-100, rng.choice(spreads))),
                    rng.randbytes(rng.randrange(4)),
                    rng.randrange(BUCKETS),
                    rng.choice((0, 0, 0, 1, 2)),
                    rng.choice((0, 0, 0, now + rng.randint(-10, 1 << 20))),
                )
                for m in rng.choices(ids, k=rng.randint(1, 10))
            ]
            if ranked:  # half of them available at once: at their rank
                batch = [ranked_at(topic, m, now, rng) for m in batch]
            statuses = await storage.insert(T, batch)
            expected = []
            for m in batch:
                if model.taken(m.id):
                    expected.append(1)
                else:
                    expected.append(0)
                    model.recs[m.id] = Rec(
                        m.timestamp,
                        m.payload,
                        m.bucket,
                        m.max_deliveries,
                        m.expires_at,
                        priority=m.priority,
                    )
            assert [int(s) for s in statuses] == expected
        elif op <= 3:
            limit = rng.choice((1, 2, 5, 1_000))
            md = rng.choice((0, 3))
            request = LeaseRequest.of(T, buckets, now, limit, rng.randint(10, 1 << 25), owner, md)
            before = {m: r.dead for m, r in model.recs.items()}
            got = (await storage.lease(request)).delivered
            died = set()
            for m, was_dead in before.items():
                try:
                    if not was_dead and (await storage.get(T, m)).dead:
                        died.add(m)
                except NotFound:
                    pass
            lease_checked(model, request, got, died)
        elif op <= 6:
            held = [m for m in some if m in model.recs]
            items = [(m, model.recs[m].version + rng.choice((0, 0, 0, 1))) for m in held]
            items += [(m, 1) for m in some if m not in model.recs][:1]
            if rng.random() < 0.1 and items:
                items.append(items[0])  # an id twice in one batch
            if op == 4:
                outs = await storage.ack(T, items, owner, now)
            elif op == 5:
                outs = await storage.extend(T, items, owner, now + rng.randint(1, 1 << 22))
            else:
                outs = await storage.nack(T, items, owner, now + rng.randint(0, 1 << 22), 2)
            for (mid, version), out in zip(items, outs, strict=True):
                r = model.recs.get(mid)
                ok = r and not r.dead and r.owner == owner and r.version == version
                assert isinstance(out, Settled) == bool(ok), (mid, out)
                if ok and op == 4:
                    assert out == Settled(mid, 0, r.ts)
                    model.delete(mid, now)
                elif ok and op == 5:
                    r.ts, r.version = out.timestamp, r.version + 1
                    assert out == Settled(mid, r.version, r.ts)
                elif ok:
                    if (r.md or 2) <= r.deliveries:
                        model.kill(mid, out.timestamp)
                        assert out.version == 0
                    else:
                        r.ts, r.owner, r.version = out.timestamp, None, r.version + 1
                        assert out.version == r.version
        elif op == 7:
            mid = some[0]
            r = model.recs.get(mid)
            version = r.version if r else 1
            movable = r and not r.dead and (r.owner is None or r.ts <= now)
            at = now + rng.randint(-50, 1 << 25)
            new_priority = None
            if ranked and rng.random() < 0.5:
                new_priority = rng.randrange(10)
                if rng.random() < 0.5:
                    at = prio.rank(topic, new_priority, now)
            try:
                if rng.random() < 0.5:
                    out = await storage.move(T, mid, version, at, now, priority=new_priority)
                    assert r and movable
                    r.ts, r.owner, r.version = at, None, r.version + 1
                    if new_priority is not None:
                        r.priority = new_priority
                    assert out == Settled(mid, r.version, at)
                else:
                    out = await storage.cancel(T, mid, version, now)
                    assert r and movable
                    assert out == Settled(mid, 0, r.ts)
                    model.delete(mid, now)
            except DejaqError:
                assert not movable
        elif op == 8:
            released = await storage.release(T, owner, now)
            mine = [r for r in model.recs.values() if r.owner == owner and not r.dead]
            for r in mine:
                r.ts, r.owner, r.version = now, None, r.version + 1
            assert released == len(mine)
        elif op == 9:
            chosen = rng.choice((None, some))
            at = now + rng.randint(0, 1 << 23)
            count = await storage.redrive(T, chosen, at)
            names = model.recs if chosen is None else dict.fromkeys(chosen)
            back = [m for m in names if m in model.recs and model.recs[m].dead]
            for m in back:
                r = model.recs[m]
                r.dead, r.deliveries, r.exp, r.ts, r.version = False, 0, 0, at, r.version + 1
            assert count == len(back)
        elif op == 10:
            before = now - rng.choice((0, 100, 1 << 24))
            purged = await storage.purge_dead(T, before)
            gone = [m for m, r in model.recs.items() if r.dead and r.ts < before]
            for m in gone:
                del model.recs[m]
            assert purged == len(gone)
            forgotten = await storage.purge_tombstones(T, before, 1_000)
            expired = [m for m, at in model.tombs.items() if at < before]
            for m in expired:
                del model.tombs[m]
            assert forgotten == len(expired)
        else:
            after = rng.choice(("", "id-3", "id-40"))
            page = await storage.list_dead(T, after, 5)
            dead = sorted(m for m, r in model.recs.items() if r.dead and m > after)[:5]
            assert page == [model.message(m) for m in dead]
        assert await storage.next_due(T, buckets) == model.next_due(buckets)
        probe = now + rng.choice((0, 10, 1 << 24))
        assert await storage.counts(T, probe) == await scanned(storage, ids, probe)
        for mid in some:
            try:
                assert await storage.get(T, mid) == model.message(mid)
            except NotFound:
                assert mid not in model.recs
        assert_consistent(storage._timelines[T])


def ranked_at(topic: Topic, m: NewMessage, now: int, rng: random.Random) -> NewMessage:
    """``m`` with a priority, and half the time at its rank (available since about now)."""
    p = rng.randrange(10)
    if rng.random() < 0.5:
        return m._replace(timestamp=prio.rank(topic, p, now - rng.randrange(100)), priority=p)
    return m._replace(priority=p)


async def promote_checked(
    storage: MemoryStorage,
    model: Model,
    topic: Topic,
    buckets: tuple[int, ...] | None,
    now: int,
    limit: int,
) -> None:
    """Promote, then check against the model which moved (the oldest; a group at
    one instant cut by the limit may go either way) and apply it there."""
    available = sorted(
        (r.ts, mid)
        for mid, r in model.recs.items()
        if not r.dead and 0 <= r.ts <= now and (buckets is None or r.bucket in buckets)
    )
    count = await storage.promote(T, buckets, now, limit)
    assert count == min(limit, len(available))
    moved = [(ts, mid) for ts, mid in available if (await storage.get(T, mid)).timestamp != ts]
    assert len(moved) == count
    cut = max((ts for ts, _ in moved), default=None)
    for ts, mid in available:
        if cut is not None and ts < cut:
            assert (ts, mid) in moved, f"{mid} available at {ts} was passed over"
    for ts, mid in moved:
        r = model.recs[mid]
        r.ts, r.owner, r.version = prio.rank(topic, r.priority, ts), None, r.version + 1


def assert_consistent(tl: Timeline) -> None:
    """The redundant parts of a timeline agree with its columns."""
    c = tl.cols
    tl.ids.check()
    state, owner = c.state[: c.used], c.owner[: c.used]
    ranked = (state == LIVE) & (c.timestamp[: c.used] < 0)
    assert tl.ranked == (np.count_nonzero(ranked) if tl.ranks is not None else 0)
    assert not (ranked & (owner != 0)).any()  # a message at a rank is never owned
    assert tl.tombs == np.count_nonzero(state == TOMB)
    assert (tl.live, tl.dead) == (np.count_nonzero(state == LIVE), np.count_nonzero(state == DEAD))
    owned = np.flatnonzero(owner != 0)
    assert (state[owned] == LIVE).all()
    assert tl.held == {c.record(s)[0]: s for s in owned.tolist()}
    numbers = Counter(owner[owned].tolist())
    assert {tl.owners.names[k]: n for k, n in numbers.items()} == {
        name: tl.owners._held[k] for k, name in enumerate(tl.owners.names) if name is not None
    }


async def test_tombstones_are_bounded_by_count_the_oldest_going_first() -> None:
    """On memory:// the dedup window alone does not bound memory under a steady
    load: ``max_tombstones`` does, forgetting the oldest before their window ends."""
    storage = MemoryStorage("memory://?max_tombstones=3")
    await storage.open()
    await g.given_topic(storage)
    ids = [f"m{i}" for i in range(5)]
    for i, mid in enumerate(ids):  # acked one after another: m0 is the oldest tombstone
        await g.given_messages(storage, g.msg(mid, g.NOW))
        (d,) = (await g.lease(storage, g.NOW + i)).delivered
        await storage.ack(g.T, [(d.id, d.version)], g.C1, g.NOW + i)
    assert (await storage.counts(g.T, g.NOW + 10)).waiting == 0
    again = await storage.insert(g.T, [g.msg(mid, g.NOW + 100) for mid in ids])
    assert again == [g.ACCEPTED, g.ACCEPTED, g.DUPLICATE, g.DUPLICATE, g.DUPLICATE]
    await storage.close()
    for url in ("memory://?max_tombstones=x", "memory://?tombs=1"):
        with pytest.raises(InvalidArgument):
            MemoryStorage(url)
