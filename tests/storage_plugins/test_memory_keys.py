"""Keys on memory://: keys with few messages share one index a bucket and make
no lane of their own; a key past a few takes a lane per bucket (key_lanes.py)
with lazy heads, and is light again once they empty.
A lane emptied is forgotten and refilled; a nack moves a key's head earlier;
a cap of 0 or a pass over some buckets leaves the other heads right; a
reused slot never shows one key's message as another's; and a pass takes
its share from the top of a million-message key, not its backlog."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from dejaq.core.model import Counts, Settled
from dejaq.storage_plugins.memory import MemoryStorage
from dejaq.storage_plugins.memory import storage as memory_storage
from dejaq.storage_plugins.memory import timeline as timeline_module
from dejaq.storage_plugins.memory.key_lanes import FEW_A_KEY, LIGHT
from dejaq.storage_plugins.memory.timeline import Timeline
from tests.storage_plugins.conformance.givens import (
    C1,
    LEASE,
    NOW,
    T,
    given_messages,
    given_topic,
    ids,
    lease,
    msg,
)


def timeline(storage: MemoryStorage) -> Timeline:
    return storage._tl(T)


async def test_keys_with_a_few_messages_each_make_no_lane_of_their_own() -> None:
    # given 300 keys with 2 messages each over the buckets
    storage = MemoryStorage()
    await given_topic(storage, dedup_window_ms=0)
    await given_messages(
        storage, *(msg(f"m{i}", NOW - i % 7, bucket=i % 4, key=f"k{i // 2}") for i in range(600))
    )
    keyed = timeline(storage).keyed
    assert keyed.lanes == {} and len(keyed.few) == 300
    # when passes lease them all (held: still live, still few) and they are acked
    leased = [d for _ in range(3) for d in (await lease(storage, limit=250)).delivered]
    assert len({d.id for d in leased}) == 600
    assert keyed.lanes == {} and len(keyed.few) == 300
    await storage.ack(T, [(d.id, d.version) for d in leased], C1, NOW)
    # then no key made a lane, and none is left behind
    assert keyed.lanes == {} and keyed.few == {}


async def test_a_key_past_a_few_takes_lanes_and_is_light_again_once_they_empty() -> None:
    # given a key with a few messages, then one more
    storage = MemoryStorage()
    await given_topic(storage, dedup_window_ms=0)
    tl = timeline(storage)
    await given_messages(
        storage, *(msg(f"a{i}", NOW - i, bucket=i % 4, key="k") for i in range(FEW_A_KEY))
    )
    assert tl.keyed.lanes == {} and set(tl.cols.lane[: tl.cols.used].tolist()) == {LIGHT}
    await given_messages(storage, msg("one-more", NOW, key="k"))
    # then the key and all its messages are in its lanes, one a bucket
    (k,) = tl.keyed.laned
    assert tl.keyed.laned == {k: 4} and tl.keyed.few == {}
    assert set(tl.cols.lane[: tl.cols.used].tolist()) == {k}
    # when all are leased and acked, and a pass finds the lanes empty
    leases = await lease(storage)
    assert len(leases.delivered) == FEW_A_KEY + 1
    await storage.ack(T, [(d.id, d.version) for d in leases.delivered], C1, NOW)
    assert ids(await lease(storage, NOW + 2 * LEASE)) == []
    # then the lanes are gone, and the key's next message is light, due and leased
    assert tl.keyed.lanes == {} and tl.keyed.laned == {}
    await given_messages(storage, msg("again", NOW + 2 * LEASE + 5, key="k"))
    assert tl.keyed.few == {k: [int(tl.find_one("again"))]}
    assert await storage.next_due(T, None) == NOW + 2 * LEASE + 5
    assert ids(await lease(storage, NOW + 2 * LEASE + 5)) == ["again"]


async def test_a_nack_moves_a_keys_head_earlier() -> None:
    # given a key with a leased message and another due much later
    storage = MemoryStorage()
    await given_topic(storage)
    await given_messages(storage, msg("m", NOW, key="k"), msg("later", NOW + 50_000, key="k"))
    [m] = (await lease(storage)).delivered
    assert await storage.next_due(T, None) == NOW + LEASE
    # when it is nacked to be due at once
    await storage.nack(T, [(m.id, m.version)], C1, NOW + 1, 0)
    # then the key's head is that message's time, and a pass takes it
    assert await storage.next_due(T, None) == NOW + 1
    assert ids(await lease(storage, NOW + 1)) == ["m"]


async def test_a_cap_of_0_for_the_only_key_keeps_its_head() -> None:
    storage = MemoryStorage()
    await given_topic(storage)
    await given_messages(storage, *(msg(f"c{i}", NOW - 9 + i, key="c") for i in range(5)))
    # when a pass may take none of it
    assert ids(await lease(storage, caps={"c": 0})) == []
    # then the key is still due from its earliest message, and a pass takes it all
    assert await storage.next_due(T, None) == NOW - 9
    assert ids(await lease(storage)) == [f"c{i}" for i in range(5)]


async def test_a_pass_over_some_buckets_leaves_the_others_heads_alone() -> None:
    # given a key due in bucket 0 and bucket 1, and another key in bucket 0
    storage = MemoryStorage()
    await given_topic(storage)
    await given_messages(
        storage,
        msg("k0", NOW - 5, bucket=0, key="k"),
        msg("k1", NOW - 3, bucket=1, key="k"),
        msg("x0", NOW - 1, bucket=0, key="x"),
    )
    # when a pass over bucket 1 takes what it has
    assert ids(await lease(storage, buckets=[1])) == ["k1"]
    # then bucket 0 still names its earliest, and its pass shares between its keys
    assert await storage.next_due(T, [0]) == NOW - 5
    assert await storage.next_due(T, [1]) == NOW + LEASE
    leases = await lease(storage, buckets=[0], limit=2)
    assert Counter(d.key for d in leases.delivered) == Counter({"k": 1, "x": 1})


async def test_a_reused_slot_is_never_another_keys_message() -> None:
    # given a message of key a leased (its lane keeps an entry at the lease's end) and acked
    storage = MemoryStorage()
    await given_topic(storage, dedup_window_ms=0)
    await given_messages(storage, msg("a", NOW, key="a"))
    [a] = (await lease(storage)).delivered
    await storage.ack(T, [(a.id, a.version)], C1, NOW)
    # when a message of key b takes its slot, due when a's lease would have ended
    await given_messages(storage, msg("b", NOW + LEASE, key="b"))
    # then the busiest keys name b alone, and a pass takes it once, as b's
    due = [(k.key, k.due) for k in await storage.keys(T, NOW + LEASE, 10)]
    assert due == [("b", 1)]
    leases = await lease(storage, NOW + LEASE)
    assert [(d.id, d.key) for d in leases.delivered] == [("b", "b")]
    assert [(k.key, k.held) for k in await storage.keys(T, NOW + LEASE, 10)] == [("b", 1)]


async def test_a_pass_takes_a_share_from_the_top_of_a_large_backlog() -> None:
    # given 100,000 messages of one key due at one millisecond, and 10 other keys
    storage = MemoryStorage()
    await given_topic(storage, buckets=1)
    await given_messages(
        storage, *(msg(f"c{i:06}", NOW - 1000, key="campaign") for i in range(100_000))
    )
    await given_messages(storage, *(msg(f"r{i}", NOW - i, key=f"r{i}") for i in range(10)))
    # when a pass may take 100
    leases = await lease(storage, limit=100)
    # then the 10 keys take one each, the campaign the rest
    assert Counter(d.key for d in leases.delivered)["campaign"] == 90
    # and the campaign's backlog still waits in its sorted run: only a chunk became heap entries
    lane = next(ln for ln in timeline(storage).keyed.lanes.values() if ln.key_no == 1)
    assert len(lane.near) < 2_000
    assert sum(len(run.keys) - run.at for run in lane.pending) > 90_000
    # and the busiest keys count it exactly
    [top] = await storage.keys(T, NOW, 1)
    assert (top.key, top.due, top.held, top.oldest) == ("campaign", 99_910, 90, NOW - 1000)


async def test_keys_capped_at_0_leave_their_places_to_later_keys() -> None:
    # given 5 keys due earliest, all capped at 0, and 5 keys due later
    storage = MemoryStorage()
    await given_topic(storage)
    await given_messages(storage, *(msg(f"x{i}", NOW - 100 + i, key=f"x{i}") for i in range(5)))
    await given_messages(storage, *(msg(f"y{i}", NOW - 10 + i, key=f"y{i}") for i in range(5)))
    caps = {f"x{i}": 0 for i in range(5)}
    # when a pass may take 5, then the later keys take one each
    assert ids(await lease(storage, limit=5, caps=caps)) == [f"y{i}" for i in range(5)]


@pytest.mark.parametrize("seed", [1, 2])
async def test_keys_light_and_laned_agree_with_a_model_through_a_walk(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given keys that come and go past a few live messages, over 4 buckets,
    # and a walk of inserts, passes (some over a few buckets), acks and nacks
    monkeypatch.setattr(timeline_module, "DUE_BY_COLUMNS", -1)  # due counts from the indexes
    rng = random.Random(seed)
    storage = MemoryStorage()
    await given_topic(storage, dedup_window_ms=0)
    tl = timeline(storage)
    now = NOW
    waiting: dict[str, tuple[str, int, int]] = {}  # id -> (key, due, bucket), not held
    held: dict[str, int] = {}  # id -> version
    made = 0
    laned_keys: set[int] = set()  # keys seen with lanes
    light_again = 0  # keys seen light after they had lanes
    for n in range(200):
        step = rng.random()
        if n % 50 == 49:  # all held acked, then past every lease: drained keys leave their lanes
            await storage.ack(T, list(held.items()), C1, now)
            held.clear()
            now += 2 * LEASE
        elif step < 0.35:
            batch = []
            for _ in range(rng.randint(1, 12)):
                key, ts, bucket = (
                    rng.choice("abcdef" if n // 50 % 2 == 0 else "ghijkl"),  # keys rest a phase
                    now + rng.randint(-20, 20),
                    rng.randint(0, 3),
                )
                waiting[f"m{made}"] = (key, ts, bucket)
                batch.append(msg(f"m{made}", ts, bucket=bucket, key=key))
                made += 1
            await given_messages(storage, *batch)
        elif step < 0.7:
            buckets = None if rng.random() < 0.6 else rng.sample(range(4), 2)
            limit = rng.randint(1, 20)
            got = (await lease(storage, now, limit=limit, buckets=buckets)).delivered
            due = {
                i: v
                for i, v in waiting.items()
                if v[1] <= now and (buckets is None or v[2] in buckets)
            }
            # then only due messages, each once; fewer than the limit only when all went
            assert {d.id for d in got} <= due.keys() and len({d.id for d in got}) == len(got)
            assert len(got) == min(limit, len(due))
            # and each message is its key's, each key's taken are its earliest due
            assert all(d.key == due[d.id][0] for d in got)
            taken = {d.id for d in got}
            for k in {due[i][0] for i in taken}:
                left = [v[1] for i, v in due.items() if v[0] == k and i not in taken]
                assert not left or max(due[i][1] for i in taken if due[i][0] == k) <= min(left)
            for d in got:
                held[d.id] = d.version
                del waiting[d.id]
        elif step < 0.85 and held:
            done = rng.sample(sorted(held), rng.randint(1, len(held)))
            outcomes = await storage.ack(T, [(i, held[i]) for i in done], C1, now)
            assert all(isinstance(o, Settled) for o in outcomes)
            for i in done:
                del held[i]
        elif held:
            (i,) = rng.sample(sorted(held), 1)
            at = now + rng.randint(-10, 30)
            await storage.nack(T, [(i, held.pop(i))], C1, at, 0)
            record = await storage.get(T, i)
            assert record is not None
            waiting[i] = (record.key, at, record.bucket)
        now += rng.randint(0, 4)  # past a lease only with none held (above)
        # then the counts, from the indexes, and the keys' due loads match the model
        due_now = sum(1 for v in waiting.values() if v[1] <= now)
        assert await storage.counts(T, now) == Counts(len(waiting) - due_now, due_now, len(held))
        assert tl.keyed.loads(now) == memory_storage._key_loads(tl.cols, now)
        # and each key is light or laned, never both, its few being its live light slots
        assert not tl.keyed.few.keys() & tl.keyed.laned.keys()
        assert all(0 < len(slots) <= FEW_A_KEY for slots in tl.keyed.few.values())
        light_again += len(laned_keys & tl.keyed.few.keys())
        laned_keys |= tl.keyed.laned.keys()
    # and the walk went both ways: keys took lanes, and keys left them
    assert laned_keys and light_again


async def test_a_leased_message_of_a_key_with_few_is_due_again_once_at_its_lease_end() -> None:
    # given a key with two messages and a message of another key, each light
    storage = MemoryStorage()
    await given_topic(storage, dedup_window_ms=0)
    await given_messages(
        storage, msg("a1", NOW, key="a"), msg("a2", NOW, key="a"), msg("b1", NOW, key="b")
    )
    tl = timeline(storage)
    slots = {k: sorted(v) for k, v in tl.keyed.few.items()}
    # when all three are leased (their entries move to the lease's end)
    first = await lease(storage)
    assert sorted(ids(first)) == ["a1", "a2", "b1"]
    # then each key still holds the same messages, light, and none is due before the end
    assert {k: sorted(v) for k, v in tl.keyed.few.items()} == slots
    assert set(tl.cols.lane[list(tl.held.values())].tolist()) == {LIGHT}
    assert ids(await lease(storage, NOW + LEASE - 1)) == []
    # and at the lease's end each is leased again, once
    again = await lease(storage, NOW + LEASE)
    assert sorted(ids(again)) == ["a1", "a2", "b1"]
    assert ids(await lease(storage, NOW + LEASE)) == [] and tl.keyed.lanes == {}
