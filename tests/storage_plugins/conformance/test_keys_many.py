"""Many keys with a few messages each, and keys growing past a few and
draining again: every due message goes out once, each key's in timestamp
order, a key's share holds as its backlog grows and shrinks, and the counts
are right after each change."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from dejaq.core.model import Counts
from dejaq.storage_plugins import Storage
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


def keys_of(leases: object) -> Counter[str]:
    return Counter(d.key for d in leases.delivered)  # type: ignore[attr-defined]


async def test_many_keys_appearing_and_draining_go_out_once_each_in_order(
    storage: Storage,
) -> None:
    # given 60 keys with 1 to 3 messages due each, one later message each of
    # 10 of them, and one key with 15 due, over 4 buckets, in three batches
    await given_topic(storage)
    due: dict[str, list[int]] = defaultdict(list)
    batches: list[list[object]] = [[], [], []]
    for k in range(60):
        for i in range(1 + k % 3):
            ts = NOW - (k * 7 + i * 13) % 50
            batches[i].append(msg(f"k{k}-{i}", ts, bucket=(k + i) % 4, key=f"k{k}"))
            due[f"k{k}"].append(ts)
    for k in range(10):
        batches[0].append(msg(f"k{k}-later", NOW + 500, bucket=k % 4, key=f"k{k}"))
    for i in range(15):
        batches[i % 3].append(msg(f"big-{i}", NOW - 40 + i, bucket=i % 4, key="big"))
        due["big"].append(NOW - 40 + i)
    for batch in batches:
        await given_messages(storage, *batch)  # type: ignore[arg-type]
    total = sum(map(len, due.values()))
    # when passes of 25 lease until nothing more is due
    seen: list[str] = []
    held: list[tuple[str, int]] = []
    by_key: dict[str, list[int]] = defaultdict(list)
    while leases := (await lease(storage, limit=25)).delivered:
        assert len(leases) <= 25
        seen += [d.id for d in leases]
        held += [(d.id, d.version) for d in leases]
        for d in leases:
            by_key[d.key].append(d.timestamp)
    # then every due message went out once, and each key's in timestamp order
    assert len(seen) == len(set(seen)) == total
    assert by_key == {k: sorted(ts) for k, ts in due.items()}
    # and the counts say so: all held, the later ones waiting
    assert await storage.counts(T, NOW) == Counts(waiting=10, due=0, leased=total)
    # when they are acked, then only the later ones are left, due at their time
    await storage.ack(T, held, C1, NOW)
    assert await storage.counts(T, NOW + 500) == Counts(waiting=0, due=10, leased=0)
    assert sorted(ids(await lease(storage, NOW + 500))) == sorted(f"k{k}-later" for k in range(10))


async def test_a_key_growing_past_a_few_keeps_its_order_and_its_share(
    storage: Storage,
) -> None:
    # given a key whose messages come one at a time, each due earlier than the
    # one before, spread over the buckets, beside three keys with one due each
    await given_topic(storage)
    for i in range(14):
        await given_messages(storage, msg(f"g{i:02}", NOW - i, bucket=i % 4, key="g"))
    await given_messages(
        storage, *(msg(f"{k}0", NOW - 20, bucket=1, key=k) for k in ("a", "b", "c"))
    )
    # when a pass may take 8: 2 each, then the 3 the others leave go to g
    leases = await lease(storage, limit=8)
    # then g takes 5, its 5 earliest, and each other key its one
    assert keys_of(leases) == Counter({"g": 5, "a": 1, "b": 1, "c": 1})
    assert sorted(d.id for d in leases.delivered if d.key == "g") == [
        f"g{i:02}" for i in range(9, 14)
    ]
    assert await storage.counts(T, NOW) == Counts(waiting=0, due=9, leased=8)


@pytest.mark.parametrize("backlog", [2, 30])
async def test_a_keys_message_put_earlier_in_another_bucket_is_found_there(
    storage: Storage, backlog: int
) -> None:
    # given a key with a backlog in bucket 0 and one message in bucket 1, leased
    await given_topic(storage)
    await given_messages(
        storage, *(msg(f"k{i:02}", NOW - 5, bucket=0, key="k") for i in range(backlog))
    )
    await given_messages(storage, msg("m", NOW - 50, bucket=1, key="k"))
    (d,) = (await lease(storage, limit=1, buckets=[1])).delivered
    assert d.id == "m"
    # when it is nacked to later, then brought earlier than the key's backlog
    await storage.nack(T, [(d.id, d.version)], C1, NOW + 100, 0)
    assert await storage.counts(T, NOW) == Counts(waiting=1, due=backlog, leased=0)
    nacked = await storage.get(T, "m")
    assert nacked is not None
    await storage.move(T, "m", nacked.version, NOW - 80, NOW)
    # then a pass over bucket 1 alone finds it, and one over both buckets takes it first
    assert await storage.counts(T, NOW) == Counts(waiting=0, due=backlog + 1, leased=0)
    assert [x.id for x in (await lease(storage, limit=1)).delivered] == ["m"]
    assert await storage.counts(T, NOW) == Counts(waiting=0, due=backlog, leased=1)
    assert ids(await lease(storage, limit=5, buckets=[1])) == []


async def test_a_key_drained_is_served_again_beside_a_new_backlog(storage: Storage) -> None:
    # given a key that had 20 due, all leased and acked
    await given_topic(storage)
    await given_messages(storage, *(msg(f"k{i:02}", NOW, bucket=i % 4, key="k") for i in range(20)))
    leases = (await lease(storage, limit=100)).delivered
    await storage.ack(T, [(d.id, d.version) for d in leases], C1, NOW)
    # when it has one message again beside another key's backlog
    later = NOW + LEASE * 3  # past the leases the drained messages had
    await given_messages(storage, msg("k-again", later, bucket=2, key="k"))
    await given_messages(
        storage, *(msg(f"c{i:02}", later - 1, bucket=i % 4, key="c") for i in range(30))
    )
    # then a pass takes it as its share, and the counts hold just those
    assert await storage.counts(T, later) == Counts(waiting=0, due=31, leased=0)
    assert keys_of(await lease(storage, later, limit=4)) == Counter({"k": 1, "c": 3})
    assert await storage.counts(T, later) == Counts(waiting=0, due=27, leased=4)
