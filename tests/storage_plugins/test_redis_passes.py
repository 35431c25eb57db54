"""What only the redis:// backend promises, part two: a lease pass and next_due
that cost one script per slot whatever the bucket count, over a heads index every
call keeps exact, and Lua that repeats the rules of ``rules.py`` exactly."""

from __future__ import annotations

import contextlib
import itertools
import random
from dataclasses import dataclass

import pytest

from dejaq.core.buckets import bucket_of
from dejaq.core.errors import (
    DejaqError,
    Leased,
    NotFound,
    NotLeaseHolder,
    StaleVersion,
)
from dejaq.core.model import Message, NewMessage, OnDuplicate
from dejaq.storage_plugins import rules
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import scripts as redis_scripts
from dejaq.storage_plugins.redis.storage import RedisStorage
from tests.redis_server import RedisServer
from tests.storage_plugins.redis_support import (
    LEASE,
    NOW,
    T,
    given_topic,
    heads_and_timelines,
    msg,
    opened,
)

# -- lease across buckets -------------------------------------------------------


def _placed(placement: str, id: str, rng: random.Random) -> int:
    if placement == "strays":  # buckets that are not the id's hash
        return rng.randrange(64)
    if placement == "skewed":  # nine in ten in one bucket: its reads grow chunk by chunk
        return 0 if rng.random() < 0.9 else rng.randrange(1, 64)
    return bucket_of(id, 64)


@pytest.mark.parametrize("slots", [1, 5, 64])
@pytest.mark.parametrize("placement", ["hashed", "strays", "skewed"])
async def test_a_lease_over_many_buckets_takes_exactly_the_earliest(
    server: RedisServer, placement: str, slots: int
) -> None:
    # given 3,000 due messages with distinct random timestamps over 64 buckets
    rng = random.Random(7)
    stamps = rng.sample(range(NOW - 100_000, NOW + 1), 3000)
    messages = [
        NewMessage(f"m{i}", ts, b"", _placed(placement, f"m{i}", rng))
        for i, ts in enumerate(stamps)
    ]
    expected = [m.id for m in sorted(messages, key=lambda m: m.timestamp)]
    async with opened(f"{server.url}?topic_slots={slots}") as storage:
        await given_topic(storage, buckets=64)
        for start in range(0, len(messages), 1000):
            await storage.insert(T, messages[start : start + 1000])
        # when it is leased in batches of random sizes
        got: list[str] = []
        while len(got) < len(expected):
            limit = rng.choice([1, 7, 100, 450, 1000])
            leases = await storage.lease(LeaseRequest.of(T, None, NOW, limit, LEASE, "c1", 0))
            assert 0 < len(leases.delivered) <= limit
            got += [d.id for d in leases.delivered]
            # then each batch is the next earliest, in order
            assert got == expected[: len(got)]
        assert await storage.next_due(T, None) == NOW + LEASE


# -- cost of a pass -------------------------------------------------------------


def scripts_run(server: RedisServer) -> int:
    with server.client() as client:
        stats = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


@pytest.mark.parametrize("buckets", [1, 64, 1024])
async def test_a_pass_is_one_script_whatever_the_bucket_count(
    server: RedisServer, buckets: int
) -> None:
    # given a one-slot topic with three due and one waiting message in every bucket
    async with opened(server.url) as storage:
        await given_topic(storage, buckets=buckets)
        stamps = (NOW - 2, NOW - 2, NOW - 2, NOW + 5)
        batch = [
            NewMessage(f"m{b}-{k}", ts, b"", b)
            for b in range(buckets)
            for k, ts in enumerate(stamps)
        ]
        await storage.insert(T, batch)
        half = range(buckets // 2, buckets)
        with server.client() as client:
            client.config_resetstat()
        # when a dispatcher leases (all buckets, then half of them) and asks next_due
        await storage.lease(LeaseRequest.of(T, None, NOW, 1, LEASE, "c1", 0))
        await storage.lease(LeaseRequest.of(T, half, NOW, 1, LEASE, "c1", 0))
        assert await storage.next_due(T, None) == NOW - 2
        assert await storage.next_due(T, half) == NOW - 2
        # then each call ran one script
        assert scripts_run(server) == 4


async def test_a_pass_over_several_slots_is_a_script_or_two_per_slot(server: RedisServer) -> None:
    # given a topic of 256 buckets over 4 slots, much due in each
    async with opened(f"{server.url}?topic_slots=4") as storage:
        await given_topic(storage, buckets=256)
        await storage.insert(T, [msg(f"m{i}", NOW - i % 7, 256) for i in range(2000)])
        with server.client() as client:
            client.config_resetstat()
        # when a pass leases 100 of them and next_due is asked
        leases = await storage.lease(LeaseRequest.of(T, None, NOW, 100, LEASE, "c1", 0))
        await storage.next_due(T, None)
        # then it peeked and leased each slot once, and read each slot's heads once
        assert len(leases.delivered) == 100
        assert scripts_run(server) <= 4 + 4 + 4


async def test_after_a_pass_that_took_everything_due_the_next_is_one_script_a_slot(
    server: RedisServer,
) -> None:
    # given a topic of 64 buckets over 16 slots, and a pass that took all that was due
    async with opened(f"{server.url}?topic_slots=16") as storage:
        await given_topic(storage, buckets=64)
        await storage.insert(T, [msg(f"a{i}", NOW - 5, 64) for i in range(200)])
        first = await storage.lease(LeaseRequest.of(T, None, NOW, 1000, LEASE, "c1", 0))
        assert len(first.delivered) == 200
        # when more falls due in every slot (each within its share of the limit)
        rng = random.Random(3)
        stamps = rng.sample(range(NOW - 1000, NOW + 1), 300)
        await storage.insert(T, [msg(f"b{i}", ts, 64) for i, ts in enumerate(stamps)])
        with server.client() as client:
            client.config_resetstat()
        leases = await storage.lease(LeaseRequest.of(T, None, NOW, 1000, LEASE, "c1", 0))
        # then the pass ran one lease script a slot, no peek
        assert scripts_run(server) == 16
        # and took every due message, in time order
        assert [d.timestamp for d in leases.delivered] == sorted(stamps)


async def test_a_backlog_met_by_a_one_round_pass_is_merged_exactly_after_it(
    server: RedisServer,
) -> None:
    # given a 16-slot topic whose last pass took everything due
    async with opened(f"{server.url}?topic_slots=16") as storage:
        await given_topic(storage, buckets=64)
        await storage.insert(T, [msg("a", NOW - 5, 64)])
        assert (
            len((await storage.lease(LeaseRequest.of(T, None, NOW, 50, LEASE, "c1", 0))).delivered)
            == 1
        )
        # when a backlog of 3,000 builds up, most of it in one slot
        rng = random.Random(5)
        stamps = rng.sample(range(NOW - 100_000, NOW + 1), 3000)
        skewed = [
            NewMessage(f"m{i}", ts, b"", 0 if i % 10 else rng.randrange(64))
            for i, ts in enumerate(stamps)
        ]
        await storage.insert(T, skewed)
        # then the pass that meets it takes its limit, none early, nothing twice
        got = [
            d.id
            for d in (
                await storage.lease(LeaseRequest.of(T, None, NOW, 50, LEASE, "c1", 0))
            ).delivered
        ]
        assert len(got) == 50
        # and the passes after it take exactly the earliest of what is left, in order
        left = sorted((m for m in skewed if m.id not in got), key=lambda m: m.timestamp)
        later = await storage.lease(LeaseRequest.of(T, None, NOW, 100, LEASE, "c1", 0))
        assert [d.id for d in later.delivered] == [m.id for m in left[:100]]


# -- the heads index ------------------------------------------------------------


@pytest.mark.parametrize("slots", [1, 3])
@pytest.mark.parametrize("keyed", [False, True], ids=["no-keys", "keys"])
async def test_the_heads_index_stays_exact_through_every_call(
    server: RedisServer, slots: int, keyed: bool
) -> None:
    # given a topic of 8 buckets, strays included, keys' lanes too, and a random
    # sequence of calls
    rng = random.Random(slots)
    async with opened(f"{server.url}?topic_slots={slots}") as storage:
        await given_topic(storage, buckets=8)
        now, n = NOW, 0
        held: list[tuple[str, int]] = []  # (id, version) of what "c1" was last given
        for step in range(400):
            action = rng.choice(["insert", "lease", "lease", "settle", "settle", "move", "other"])
            if action == "insert":
                batch = []
                for _ in range(rng.randrange(1, 4)):
                    n += 1
                    bucket = rng.randrange(8) if rng.random() < 0.2 else bucket_of(f"m{n}", 8)
                    expiry = rng.choice([0, 0, now + rng.randrange(-5, 50)])
                    ts = now + rng.randrange(-20, 40)
                    key = rng.choice(["", "a", "b", "ключ:1"]) if keyed else ""
                    md = rng.choice([0, 2])
                    batch.append(NewMessage(f"m{n}", ts, b"", bucket, md, expiry, key=key))
                await storage.insert(T, batch)
            elif action == "lease":
                buckets = rng.choice([None, [rng.randrange(8)], range(2, 6)])
                request = LeaseRequest.of(T, buckets, now, rng.randrange(1, 6), 30, "c1", 3)
                leases = await storage.lease(request)
                assert all(d.timestamp <= now for d in leases.delivered)
                held += [(d.id, d.version) for d in leases.delivered]
            elif action == "settle":
                items = [held.pop(rng.randrange(len(held))) for _ in range(min(3, len(held)))]
                kind = rng.choice(["ack", "extend", "nack"])
                if kind == "ack":
                    await storage.ack(T, items, "c1", now)
                elif kind == "extend":
                    await storage.extend(T, items, "c1", now + rng.randrange(1, 80))
                else:
                    await storage.nack(T, items, "c1", now + rng.randrange(0, 30), 2)
            elif action == "move" and n:
                m = await _maybe(storage, f"m{rng.randrange(1, n + 1)}")
                with contextlib.suppress(DejaqError):
                    if m is None:
                        pass
                    elif rng.random() < 0.5:
                        await storage.move(T, m.id, m.version, now + rng.randrange(-9, 60), now)
                    else:
                        await storage.cancel(T, m.id, m.version, now)
            elif rng.random() < 0.5:
                await storage.release(T, "c1", now)
            else:
                await storage.redrive(T, None if rng.random() < 0.5 else ["m1", "m2"], now)
            now += rng.randrange(0, 8)
            # then after every call each slot's heads are its timelines' first scores
            heads, firsts = heads_and_timelines(server, slots)
            assert heads == firsts, f"step {step}: {action}"
            due = await storage.next_due(T, None)
            everything = [s for f in firsts.values() for s in f.values()]
            assert due == min(everything, default=None)


async def _maybe(storage: RedisStorage, id: str) -> Message | None:
    try:
        return await storage.get(T, id)
    except NotFound:
        return None


# -- Lua repeats the rules --------------------------------------------------------

RULES_PROBE = """
local out = {}
for i = 1, #ARGV, 5 do
  local n, own, topic, ex, now = tonumber(ARGV[i]), tonumber(ARGV[i + 1]),
    tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local md = effective_max_deliveries(own, topic)
  push(out, lease_fate(n, own, topic, ex, now), int(md),
       dies_on_nack(n, md) and 1 or 0, at_most_once(md) and 1 or 0)
end
return out
"""

CHECKS_PROBE = """
local out = {}
for i = 1, #ARGV, 8 do
  local rec = nil
  if ARGV[i] ~= 'absent' then
    rec = {dead = ARGV[i] == 'dead', o = ARGV[i + 1] ~= '' and ARGV[i + 1] or false,
           v = tonumber(ARGV[i + 2]), ts = tonumber(ARGV[i + 3])}
  end
  local owner, version, now = ARGV[i + 4], tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6])
  push(out, check_holder(rec, owner, version), check_movable(rec, version, now),
       on_duplicate('replace', rec, now), on_duplicate('extend', rec, now))
end
return out
"""


@dataclass(frozen=True)
class Stored:
    owner: str | None
    timestamp: int
    version: int
    dead: bool


CODES: dict[type[DejaqError] | None, int] = {
    None: redis_scripts.OK,
    NotFound: redis_scripts.NOT_FOUND,
    NotLeaseHolder: redis_scripts.NOT_HOLDER,
    StaleVersion: redis_scripts.STALE,
    Leased: redis_scripts.LEASED,
}


def test_the_lua_delivery_rules_are_the_python_ones(server: RedisServer) -> None:
    # given every combination of deliveries, limits and expiry around now
    cases = list(
        itertools.product(range(4), range(4), (0, 1, 3), (0, NOW - 1, NOW, NOW + 1), (NOW,))
    )
    # when each runs through the Lua helpers
    with server.client() as client:
        args = [str(v) for case in cases for v in case]
        reply = client.eval(redis_scripts.program(RULES_PROBE), 0, *args)
    # then each answer is rules.py's
    for k, (n, own, topic, ex, now) in enumerate(cases):
        fate, md, dies, once = reply[4 * k : 4 * k + 4]
        expected_md = rules.effective_max_deliveries(own, topic)
        assert int(md) == expected_md
        assert fate.decode() == rules.lease_fate(n, own, topic, ex, now).value, (n, own, topic, ex)
        assert bool(dies) == rules.dies_on_nack(n, expected_md)
        assert bool(once) == rules.at_most_once(expected_md)


def test_the_lua_settle_and_move_checks_are_the_python_ones(server: RedisServer) -> None:
    # given stored records in every state against settles and moves quoting versions
    records = [None, Stored(None, NOW, 1, True)] + [
        Stored(owner, ts, version, False)
        for owner in (None, "c1", "c2")
        for ts in (NOW - 1, NOW, NOW + 1)
        for version in (1, 2)
    ]
    cases = [(rec, "c1", version, NOW) for rec in records for version in (1, 2)]
    args: list[str] = []
    for rec, owner, version, now in cases:
        state = "absent" if rec is None else "dead" if rec.dead else "live"
        owner_now = rec.owner or "" if rec else ""
        ts = rec.timestamp if rec else 0
        args += [state, owner_now, str(rec.version if rec else 0), str(ts)]
        args += [owner, str(version), str(now), ""]
    # when each runs through the Lua checks
    with server.client() as client:
        reply = client.eval(redis_scripts.program(CHECKS_PROBE), 0, *args)
    # then each refusal is the one rules.py gives, and so is each debounce's verdict
    for k, (rec, owner, version, now) in enumerate(cases):
        holder = rules.settle_refusal("m", rec, owner, version)
        movable = rules.move_refusal("m", rec, version, now)
        replace, extend = reply[4 * k + 2 : 4 * k + 4]
        assert reply[4 * k] == CODES[type(holder) if holder else None], (rec, version)
        assert reply[4 * k + 1] == CODES[type(movable) if movable else None], (rec, version)
        live = rec is not None and not rec.dead
        owner_now, ts = (rec.owner, rec.timestamp) if rec else (None, 0)
        for mode, verdict in ((OnDuplicate.REPLACE, replace), (OnDuplicate.EXTEND, extend)):
            assert verdict == rules.on_duplicate(mode, live, owner_now, ts, now), (rec, mode)
