"""What only the redis:// backend promises for priority topics: ranks (negative
timestamps of 14 digits) stored and read back exactly through Lua and doubles,
the rank formula in Lua pinned to core.priority, and a promote that costs one
script per slot and keeps the heads and owned indexes exact."""

from __future__ import annotations

import contextlib
import random
import time

import pytest

from dejaq.core import priority
from dejaq.core.buckets import bucket_of
from dejaq.core.errors import DejaqError, InvalidArgument, NotFound
from dejaq.core.model import KIND_PRIORITY, Counts, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import Head, LeaseRequest
from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis import record as redis_record
from dejaq.storage_plugins.redis import scripts as redis_scripts
from tests.redis_server import RedisServer
from tests.storage_plugins.redis_support import (
    LEASE,
    T,
    given_topic,
    heads_and_timelines,
    opened,
)

WALL_NOW = int(time.time() * 1000)  # created_at_ms near now, as a broker makes it


def priority_topic(buckets: int = 8, aging_ms: int = 0, created_at_ms: int = WALL_NOW) -> Topic:
    settings = TopicSettings(
        buckets=buckets, lease_ms=LEASE, kind=KIND_PRIORITY, priorities=1000, aging_ms=aging_ms
    )
    return Topic(T, settings, created_at_ms)


def pmsg(id: str, ts: int, p: int, buckets: int = 8) -> NewMessage:
    return NewMessage(id, ts, id.encode(), bucket_of(id, buckets), priority=p)


def mixed_backlog(
    rng: random.Random, topic: Topic, now: int, count: int, ranked_every: int, strays: bool
) -> list[NewMessage]:
    """``count`` messages over 64 buckets at distinct random times up to 50 s
    after ``now``, priorities 0..6: one in ``ranked_every`` ranked (available
    100 s before its time), the others not before their time; each in its
    hashed bucket or (``strays``) a random one."""
    stamps = rng.sample(range(topic.created_at_ms, now + 50_000), count)
    return [
        NewMessage(
            f"m{i}",
            ts if i % ranked_every else priority.rank(topic, i % 7, ts - 100_000),
            b"",
            rng.randrange(64) if strays else bucket_of(f"m{i}", 64),
            priority=i % 7,
        )
        for i, ts in enumerate(stamps)
    ]


def raw(server: RedisServer, id: str, buckets: int = 8) -> tuple[str, float, str | None]:
    """A record's timestamp and priority (None for 0) and its score, as Redis holds them."""
    slot = redis_keys.Slot(T, 0, 1)
    with server.client() as client:
        rec = redis_record.decode(client.hget(slot.records, id))
        score = client.zscore(slot.timeline(bucket_of(id, buckets)), id)
    return str(rec.ts), score, str(rec.priority) if rec.priority else None


# -- ranks, exactly ---------------------------------------------------------------


@pytest.mark.parametrize("aging_ms", [0, 1])
async def test_ranks_are_stored_and_read_back_exactly_at_the_extremes(
    server: RedisServer, aging_ms: int
) -> None:
    # given a topic of 1,000 priorities created a moment ago, and messages of
    # the most and least urgent priorities that became available at its
    # creation, a millisecond later and much later (ranks of 14 digits)
    topic = priority_topic(aging_ms=aging_ms)
    created = topic.created_at_ms
    cases = [
        (p, at) for p in (0, 1, 998, 999) for at in (created, created + 1, created + 10**9 + 7)
    ]
    batch = [pmsg(f"m{p}-{at - created}", at, p) for p, at in cases]
    async with opened(server.url) as storage:
        await storage.create_topic(topic)
        await storage.insert(T, batch)
        # when they are promoted
        now = created + 10**9 + 7
        assert await storage.promote(T, None, now, 100) == len(batch)
        # then each sits at exactly core.priority.rank, in the record and the score
        expected = {m.id: priority.rank(topic, m.priority, m.timestamp) for m in batch}
        assert min(expected.values()) == -priority.RANK_BASE
        for m in batch:
            ts, score, p = raw(server, m.id)
            field = str(m.priority) if m.priority else None  # 0: no field, as on a timeline
            assert (ts, score, p) == (str(expected[m.id]), expected[m.id], field)
            got = await storage.get(T, m.id)
            assert (got.timestamp, got.priority, got.version) == (expected[m.id], m.priority, 2)
            assert priority.available_at(topic, got.priority, got.timestamp) == m.timestamp
        # and next_due and a lease pass read them back exactly, most urgent first
        assert await storage.next_due(T, None) == -priority.RANK_BASE
        leases = await storage.lease(LeaseRequest.of(T, None, now, 100, LEASE, "c1"))
        delivered = [(d.timestamp, d.id, d.priority) for d in leases.delivered]
        assert sorted(delivered) == sorted((expected[m.id], m.id, m.priority) for m in batch)
        assert [ts for ts, _, _ in delivered] == sorted(expected.values())  # ties in any order


RANK_PROBE = """
local out = {}
for i = 1, #ARGV, 5 do
  out[#out + 1] = rank(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]),
                       tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]))
end
return out
"""


def test_the_lua_rank_is_core_priority_rank(server: RedisServer) -> None:
    # given topics of every aging step and creation time, and priorities and
    # availability times at the edges
    topics = [
        priority_topic(aging_ms=aging, created_at_ms=created)
        for aging in (0, 1, 1000, 3_600_000)
        for created in (0, WALL_NOW)
    ]
    cases = [
        (t, p, t.created_at_ms + delta)
        for t in topics
        for p in (0, 1, 500, 998, 999)
        for delta in (0, 1, 999, 86_400_000, 10**10 + 3)
    ]
    args = [
        str(v)
        for t, p, at in cases
        for v in (p, at, priority.step(t), t.created_at_ms, priority.RANK_BASE)
    ]
    # when each runs through the Lua helper, with core.priority's step and base
    with server.client() as client:
        reply = client.eval(redis_scripts.program(RANK_PROBE), 0, *args)
    # then it is core.priority.rank to the unit
    assert [int(r) for r in reply] == [priority.rank(t, p, at) for t, p, at in cases]


# -- promote ------------------------------------------------------------------------


@pytest.mark.parametrize("slots", [1, 5])
@pytest.mark.parametrize("strays", [False, True], ids=["hashed", "strays"])
async def test_a_promote_over_many_buckets_takes_exactly_the_oldest(
    server: RedisServer, strays: bool, slots: int
) -> None:
    # given 1,500 messages over 64 buckets: available ones at distinct random
    # times, some not yet available, some already ranked
    rng = random.Random(11)
    topic = priority_topic(buckets=64, aging_ms=10)
    now = topic.created_at_ms + 200_000
    messages = mixed_backlog(rng, topic, now, 1500, ranked_every=10, strays=strays)
    waiting = [m for m in messages if 0 <= m.timestamp]
    expected = [m.id for m in sorted(waiting, key=lambda m: m.timestamp) if m.timestamp <= now]
    async with opened(f"{server.url}?topic_slots={slots}") as storage:
        await storage.create_topic(topic)
        await storage.insert(T, messages)
        # when promotes of random sizes run
        got: list[str] = []
        pending = {m.id: m.timestamp for m in waiting}
        while True:
            limit = rng.choice([1, 7, 100, 450])
            promoted = await storage.promote(T, None, now, limit)
            stamps = recorded(server, list(pending), slots, 64)
            moved = [id for id in pending if stamps[id] < 0]
            if not promoted:
                break
            # then each takes the oldest available, never more than its limit
            assert len(moved) == promoted <= limit
            assert sorted(moved) == sorted(expected[len(got) : len(got) + promoted])
            for id in moved:
                assert stamps[id] == priority.rank(topic, int(id[1:]) % 7, pending.pop(id))
            got += moved
        assert sorted(got) == sorted(expected)
        # and what is not yet available keeps its time
        assert all(ts > now for ts in pending.values())
        assert recorded(server, list(pending), slots, 64) == pending
        heads, firsts = heads_and_timelines(server, slots)
        assert heads == firsts


def recorded(server: RedisServer, ids: list[str], slots: int, buckets: int) -> dict[str, int]:
    """The timestamp of each record, read raw in one round trip."""
    with server.client() as client:
        pipe = client.pipeline(transaction=False)
        for id in ids:
            home = redis_keys.Slot(T, bucket_of(id, buckets) * slots // buckets, slots)
            pipe.hget(home.records, id)
        return {
            id: redis_record.decode(rec).ts for id, rec in zip(ids, pipe.execute(), strict=True)
        }


def waits_and_timelines(
    server: RedisServer, slots: int
) -> dict[int, tuple[dict[int, int], dict[int, int]]]:
    """Per slot: its waits index, and each timeline's first score >= 0, read raw."""
    out = {}
    with server.client() as client:
        for i in range(slots):
            slot = redis_keys.Slot(T, i, slots)
            waits = {int(b): int(s) for b, s in client.zrange(slot.waits, 0, -1, withscores=True)}
            unranked = {}
            for key in client.keys(slot.timeline(0)[:-1] + "*"):
                first = client.zrangebyscore(key, 0, "+inf", start=0, num=1, withscores=True)
                if first:
                    unranked[int(key.decode().rsplit(":", 1)[1])] = int(first[0][1])
            out[i] = (waits, unranked)
    return out


def commands_run(server: RedisServer, name: str) -> int:
    """How many times ``name`` ran, scripts' calls included, since the last reset."""
    with server.client() as client:
        stats = client.info("commandstats")
    return int(stats.get(f"cmdstat_{name}", {}).get("calls", 0))


async def test_an_idle_promote_reads_no_timeline_however_many_are_ranked(
    server: RedisServer,
) -> None:
    # given 1,024 buckets, each with ranked messages (a backlog) and one not
    # available for a long while, and a promote that saw them all once
    topic = priority_topic(buckets=1024)
    now = topic.created_at_ms + 100
    async with opened(server.url) as storage:
        await storage.create_topic(topic)
        batch = [
            NewMessage(f"m{b}-{k}", priority.rank(topic, k, now), b"", b, priority=k)
            for b in range(1024)
            for k in (0, 1)
        ]
        batch += [NewMessage(f"later{b}", now + 10**6, b"", b) for b in range(1024)]
        await storage.insert(T, batch)
        assert await storage.promote(T, None, now, 100) == 0
        with server.client() as client:
            client.config_resetstat()
        # when promote runs again, with nothing available
        assert await storage.promote(T, None, now + 5, 100) == 0
        # then it read no timeline: the waits index says none has anything
        assert commands_run(server, "zrange") == 1  # the waits index itself
        # and when leases that were acked leave their (stale) expiry in waits
        leases = await storage.lease(LeaseRequest.of(T, None, now, 50, LEASE, "c1"))
        acked = await storage.ack(T, [(d.id, d.version) for d in leases.delivered], "c1", now)
        assert not any(isinstance(a, DejaqError) for a in acked)
        later = now + LEASE + 1
        # then the first promote after that time reads those timelines once
        assert await storage.promote(T, None, later, 100) == 0
        with server.client() as client:
            client.config_resetstat()
        assert await storage.promote(T, None, later, 100) == 0
        assert commands_run(server, "zrange") == 1


def scripts_run(server: RedisServer) -> int:
    with server.client() as client:
        stats = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


@pytest.mark.parametrize("buckets", [1, 64, 1024])
async def test_a_promote_is_one_script_whatever_the_bucket_count(
    server: RedisServer, buckets: int
) -> None:
    # given a one-slot priority topic with three available messages in every bucket
    topic = priority_topic(buckets=buckets)
    now = topic.created_at_ms + 100
    async with opened(server.url) as storage:
        await storage.create_topic(topic)
        batch = [
            NewMessage(f"m{b}-{k}", now - 1, b"", b, priority=k)
            for b in range(buckets)
            for k in (0, 1, 2)
        ]
        await storage.insert(T, batch)
        with server.client() as client:
            client.config_resetstat()
        # when promotes run over all buckets, then half of them
        assert await storage.promote(T, None, now, 2) == 2
        assert await storage.promote(T, range(buckets // 2, buckets), now, 1) == 1
        # then each ran one script
        assert scripts_run(server) == 2


@pytest.mark.parametrize("slots", [1, 5])
@pytest.mark.parametrize("strays", [False, True], ids=["hashed", "strays"])
async def test_the_census_head_is_exact_over_slots_and_strays(
    server: RedisServer, strays: bool, slots: int
) -> None:
    # given 600 messages over 64 buckets: ranked (aging may tie ranks), waiting for
    # a not-before time (past and future), some leased and acked (which leaves
    # their lease's end in `waits`, a bound below what the timeline holds)
    rng = random.Random(5)
    topic = priority_topic(buckets=64, aging_ms=10)
    now = topic.created_at_ms + 200_000
    messages = mixed_backlog(rng, topic, now, 600, ranked_every=3, strays=strays)
    async with opened(f"{server.url}?topic_slots={slots}") as storage:
        await storage.create_topic(topic)
        await storage.insert(T, messages)
        leases = await storage.lease(LeaseRequest.of(T, None, now, 120, LEASE, "c1"))
        acked = leases.delivered[::2]
        await storage.ack(T, [(d.id, d.version) for d in acked], "c1", now)
        for at in (now, now + LEASE // 2, now + 2 * LEASE):
            # when the census is taken
            entry = (await storage.census(at))[T]
            # then it is what the records say
            live = {m.id: m.priority for m in messages}
            for d in acked:
                live.pop(d.id)
            ts = recorded(server, list(live), slots, 64)
            oldest = min(ts.values())
            at_head = {live[id] for id, t in ts.items() if t == oldest}  # aging may tie
            due = [t for t in ts.values() if 0 <= t <= at]
            assert entry.oldest == oldest < 0
            assert entry.head is not None and entry.head.priority in at_head
            assert entry.head.due == min(due, default=None)


async def test_the_head_counts_a_due_message_of_a_slot_without_ranks(server: RedisServer) -> None:
    # given two slots: one holds only a message ranked 10 ms ago, the other only
    # one due 5 s ago and not ranked yet (no pass has promoted its buckets)
    topic = priority_topic(buckets=2)
    now = topic.created_at_ms + 100_000
    ranked = NewMessage("r", priority.rank(topic, 0, now - 10), b"", 0, priority=0)
    waiting = NewMessage("w", now - 5_000, b"", 1, priority=0)
    async with opened(f"{server.url}?topic_slots=2") as storage:
        await storage.create_topic(topic)
        await storage.insert(T, [ranked, waiting])
        # when the census is taken, then the head's due part is the older one
        entry = (await storage.census(now))[T]
        assert entry.oldest == ranked.timestamp
        assert entry.head == Head(0, now - 5_000)


async def test_a_census_reads_a_few_timelines_however_many_buckets(server: RedisServer) -> None:
    # given 1,024 buckets, each with ranked messages and one due and not ranked yet
    topic = priority_topic(buckets=1024)
    now = topic.created_at_ms + 100
    async with opened(server.url) as storage:
        await storage.create_topic(topic)
        batch = [
            NewMessage(f"m{b}-{k}", priority.rank(topic, k, now - b), b"", b, priority=k)
            for b in range(1024)
            for k in (0, 1)
        ]
        batch += [NewMessage(f"come{b}", now - 50, b"", b) for b in range(1024)]
        await storage.insert(T, batch)
        with server.client() as client:
            client.config_resetstat()
        # when the census is taken
        entry = (await storage.census(now))[T]
        # then it found the head and the oldest due message
        assert entry.oldest == priority.rank(topic, 0, now - 1023)
        assert entry.head == Head(0, now - 50)
        # reading the heads and waits indexes, the head's timeline and one
        # other (and the heads index once more and the live grants for the counts)
        assert commands_run(server, "zrange") == 6


async def test_a_promote_of_a_lapsed_lease_clears_the_owner_and_its_grant(
    server: RedisServer,
) -> None:
    # given a ranked message leased by c1, whose lease has run out
    topic = priority_topic()
    now = topic.created_at_ms + 10
    async with opened(server.url) as storage:
        await storage.create_topic(topic)
        await storage.insert(T, [pmsg("a", priority.rank(topic, 4, now), 4)])
        [leased] = (await storage.lease(LeaseRequest.of(T, None, now, 1, LEASE, "c1"))).delivered
        assert (await storage.counts(T, now)).leased == 1
        # when it is promoted once the lease has run out
        later = now + LEASE + 5
        assert await storage.promote(T, None, later, 10) == 1
        # then it is ranked by when it became available again, unowned, counted as due
        m = await storage.get(T, "a")
        assert m.timestamp == priority.rank(topic, 4, now + LEASE)
        assert (m.lease_owner, m.version) == (None, leased.version + 1)
        assert await storage.counts(T, later) == Counts(due=1)
        with server.client() as client:
            assert client.zcard(redis_keys.Slot(T, 0, 1).grants) == 0
        # and the former holder can no longer settle it
        [refused] = await storage.ack(T, [("a", leased.version)], "c1", later)
        assert isinstance(refused, DejaqError)


async def test_a_timeline_keeps_records_without_a_priority_and_refuses_promote(
    server: RedisServer,
) -> None:
    async with opened(server.url) as storage:
        # given a timeline message
        await given_topic(storage)
        await storage.insert(T, [NewMessage("a", 5, b"", bucket_of("a", 8))])
        # then its record holds no priority field, and promote is refused
        assert raw(server, "a")[2] is None
        assert (await storage.get(T, "a")).priority == 0
        with pytest.raises(InvalidArgument):
            await storage.promote(T, None, 10, 10)
        with pytest.raises(NotFound):
            await storage.promote("missing", None, 10, 10)


async def test_a_move_sets_and_clears_the_priority_field(server: RedisServer) -> None:
    topic = priority_topic()
    now = topic.created_at_ms + 10
    async with opened(server.url) as storage:
        await storage.create_topic(topic)
        await storage.insert(T, [pmsg("a", now, 3)])
        # when moved to priority 7, then to 0, then only in time
        s1 = await storage.move(T, "a", 1, now + 5, now, priority=7)
        assert raw(server, "a")[2] == "7"
        s2 = await storage.move(T, "a", s1.version, now + 6, now, priority=0)
        assert raw(server, "a")[2] is None
        await storage.move(T, "a", s2.version, priority.rank(topic, 0, now), now)
        # then the record holds what was asked, and a 0 as no field at all
        m = await storage.get(T, "a")
        assert (m.priority, m.timestamp, m.version) == (0, priority.rank(topic, 0, now), 4)


@pytest.mark.parametrize("slots", [1, 3])
async def test_the_heads_index_stays_exact_through_promotes(
    server: RedisServer, slots: int
) -> None:
    # given a priority topic and a random sequence of calls, promotes among them
    rng = random.Random(slots)
    topic = priority_topic(aging_ms=5)
    async with opened(f"{server.url}?topic_slots={slots}") as storage:
        await storage.create_topic(topic)
        now, n = topic.created_at_ms + 1000, 0
        held: list[tuple[str, int]] = []
        for step in range(300):
            action = rng.choice(
                ["insert", "promote", "promote", "lease", "settle", "move", "release", "redrive"]
            )
            if action == "insert":
                batch = []
                for _ in range(rng.randrange(1, 4)):
                    n += 1
                    p = rng.randrange(5)
                    ts = rng.choice([priority.rank(topic, p, now), now + rng.randrange(-20, 40)])
                    batch.append(pmsg(f"m{n}", ts, p))
                await storage.insert(T, batch)
            elif action == "promote":
                buckets = rng.choice([None, [rng.randrange(8)], range(2, 6)])
                await storage.promote(T, buckets, now, rng.randrange(1, 6))
            elif action == "lease":
                request = LeaseRequest.of(T, None, now, rng.randrange(1, 4), 30, "c1", 3)
                held += [(d.id, d.version) for d in (await storage.lease(request)).delivered]
            elif action == "settle":
                items = [held.pop(rng.randrange(len(held))) for _ in range(min(2, len(held)))]
                await storage.nack(T, items, "c1", now + rng.randrange(0, 30), 3)
            elif action == "release":
                await storage.release(T, "c1", now)
                held.clear()
            elif action == "redrive":
                await storage.redrive(T, None, now)
            elif n:
                with contextlib.suppress(DejaqError):
                    m = await storage.get(T, f"m{rng.randrange(1, n + 1)}")
                    p = rng.randrange(5)
                    at = priority.rank(topic, p, now)
                    await storage.move(T, m.id, m.version, at, now, None, p)
            now += rng.randrange(0, 8)
            # then after every call each slot's heads are its timelines' first scores
            heads, firsts = heads_and_timelines(server, slots)
            assert heads == firsts, f"step {step}: {action}"
            everything = [s for f in firsts.values() for s in f.values()]
            assert await storage.next_due(T, None) == min(everything, default=None)
            # and its waits a lower bound of each timeline's first score not ranked
            for slot, (waits, unranked) in waits_and_timelines(server, slots).items():
                assert set(unranked) <= set(waits), f"step {step}: {action}"
                assert all(waits[b] <= first for b, first in unranked.items()), (step, slot)
