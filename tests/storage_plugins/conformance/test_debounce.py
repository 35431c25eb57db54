"""Debounce: an insert that replaces or extends the waiting message of its id."""

from __future__ import annotations

import asyncio

from dejaq.core.model import Counts, InsertStatus, OnDuplicate
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    ACCEPTED,
    C1,
    DUPLICATE,
    LEASE,
    NOW,
    T,
    given_messages,
    given_topic,
    ids,
    lease,
    msg,
)

KEEP, REPLACE, EXTEND = OnDuplicate.KEEP, OnDuplicate.REPLACE, OnDuplicate.EXTEND
REPLACED, EXTENDED, LEASED = InsertStatus.REPLACED, InsertStatus.EXTENDED, InsertStatus.LEASED
LATER = NOW + 5_000


async def given_waiting(storage: Storage, key: str = "", dedup_window_ms: int = 0) -> None:
    """A topic with message "a" waiting, due at NOW + 1000, payload b"old"."""
    await given_topic(storage, dedup_window_ms=dedup_window_ms)
    await given_messages(storage, msg("a", NOW + 1000, payload=b"old", key=key, headers=b"h1"))


async def test_keep_leaves_the_waiting_message_as_it_was(storage: Storage) -> None:
    await given_waiting(storage)
    # when the id is produced again, keeping
    assert await storage.insert(T, [msg("a", LATER, payload=b"new")], KEEP, NOW) == [DUPLICATE]
    # then nothing changed
    m = await storage.get(T, "a")
    assert (m.timestamp, m.payload, m.version) == (NOW + 1000, b"old", 1)


async def test_replace_takes_the_new_time_payload_key_and_headers(storage: Storage) -> None:
    await given_waiting(storage, key="k1")
    # when the id is produced again, replacing
    new = msg("a", LATER, payload=b"new", key="k2", headers=b"h2", max_deliveries=3)
    assert await storage.insert(T, [new], REPLACE, NOW) == [REPLACED]
    # then the one message has every new field and its version moved on
    m = await storage.get(T, "a")
    assert (m.timestamp, m.payload, m.key, m.headers) == (LATER, b"new", "k2", b"h2")
    assert (m.version, m.deliveries, m.max_deliveries) == (2, 0, 3)
    assert await storage.counts(T, NOW) == Counts(waiting=1)
    # and it is delivered once, at its new time, under its new key only
    assert ids(await lease(storage, NOW + 1000)) == []
    assert [k.key for k in await storage.keys(T, LATER, 10)] == ["k2"]
    (d,) = (await lease(storage, LATER)).delivered
    assert (d.id, d.payload, d.key, d.version) == ("a", b"new", "k2", 3)
    assert ids(await lease(storage, LATER + 2 * LEASE + 1, owner="c2")) == ["a"]  # lease ran out


async def test_extend_moves_the_due_time_only(storage: Storage) -> None:
    await given_waiting(storage, key="k1")
    # when the id is produced again, extending
    new = msg("a", LATER, payload=b"new", key="k2")
    assert await storage.insert(T, [new], EXTEND, NOW) == [EXTENDED]
    # then only its time and version changed
    m = await storage.get(T, "a")
    assert (m.timestamp, m.payload, m.key, m.headers, m.version) == (LATER, b"old", "k1", b"h1", 2)
    assert ids(await lease(storage, NOW + 1000)) == []
    assert ids(await lease(storage, LATER)) == ["a"]


async def test_extend_may_bring_the_due_time_earlier(storage: Storage) -> None:
    await given_waiting(storage)
    assert await storage.insert(T, [msg("a", NOW)], EXTEND, NOW) == [EXTENDED]
    assert ids(await lease(storage, NOW)) == ["a"]


async def test_a_leased_message_is_neither_replaced_nor_moved(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("a", NOW, payload=b"old"))
    assert ids(await lease(storage)) == ["a"]
    for mode in (REPLACE, EXTEND):
        # when it is produced again while its lease runs
        assert await storage.insert(T, [msg("a", LATER, payload=b"new")], mode, NOW + 1) == [LEASED]
        # then it is as the lease left it
        m = await storage.get(T, "a")
        assert (m.timestamp, m.payload, m.version, m.lease_owner) == (NOW + LEASE, b"old", 2, C1)


async def test_a_message_whose_lease_ran_out_is_replaced(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("a", NOW, payload=b"old"))
    await lease(storage)
    after = NOW + LEASE + 1
    assert await storage.insert(T, [msg("a", LATER, payload=b"new")], REPLACE, after) == [REPLACED]
    m = await storage.get(T, "a")
    assert (m.timestamp, m.payload, m.lease_owner, m.deliveries) == (LATER, b"new", None, 1)
    assert await storage.counts(T, after) == Counts(waiting=1)


async def test_a_dead_or_tombstoned_id_stays_taken_and_a_gone_one_is_new(
    storage: Storage,
) -> None:
    # given a dead message, an acked one (a tombstone) and an id never seen
    await given_topic(storage, dedup_window_ms=60_000)
    await given_messages(storage, msg("dead", NOW, max_deliveries=1), msg("acked", NOW))
    await lease(storage, max_deliveries=1)  # "dead": delivered at most once, then deleted
    await given_messages(storage, msg("died", NOW, expires_at=NOW))
    await lease(storage, NOW + 1)  # "died" expired: dead
    for mode in (REPLACE, EXTEND):
        # when each is produced with replace or extend
        statuses = await storage.insert(
            T, [msg("dead", LATER), msg("died", LATER), msg(f"new-{mode.label}", LATER)], mode, NOW
        )
        # then the taken ones answer as keep does, the new one is stored
        assert statuses == [DUPLICATE, DUPLICATE, ACCEPTED]
    assert (await storage.get(T, "died")).dead


async def test_repeats_in_one_batch_apply_in_order_the_last_wins(storage: Storage) -> None:
    await given_topic(storage)
    batch = [msg("a", NOW + i, payload=b"p%d" % i) for i in range(3)]
    # when one batch names the id three times, replacing
    assert await storage.insert(T, batch, REPLACE, NOW) == [ACCEPTED, REPLACED, REPLACED]
    m = await storage.get(T, "a")
    assert (m.timestamp, m.payload) == (NOW + 2, b"p2")
    # and extending keeps the payload there, taking the last time
    assert await storage.insert(T, batch, EXTEND, NOW) == [EXTENDED] * 3
    m = await storage.get(T, "a")
    assert (m.timestamp, m.payload) == (NOW + 2, b"p2")
    assert await storage.counts(T, NOW - 1) == Counts(waiting=1)


async def test_concurrent_replaces_end_with_one_message_the_last_applied(
    storage: Storage,
) -> None:
    await given_topic(storage)
    # when twenty producers replace one id at once
    results = await asyncio.gather(
        *(
            storage.insert(T, [msg("a", LATER + i, payload=b"p%d" % i)], REPLACE, NOW)
            for i in range(20)
        )
    )
    statuses = [s for (s,) in results]
    # then one stored it, the others replaced it in turn, and one message is left
    assert sorted(statuses) == [ACCEPTED] + [REPLACED] * 19
    m = await storage.get(T, "a")
    assert m.version == 20  # every change applied once, one after the other
    assert m.payload == b"p%d" % (m.timestamp - LATER)  # one producer's time and payload
    assert await storage.counts(T, NOW) == Counts(waiting=1)


async def test_a_replace_racing_a_lease_pass_is_never_early(storage: Storage) -> None:
    await given_topic(storage)
    for round in range(10):
        id = f"r{round}"
        await given_messages(storage, msg(id, NOW, payload=b"old"))
        # when a replace moving it later races a lease pass at its due time
        leases, (status,) = await asyncio.gather(
            lease(storage, NOW),
            storage.insert(T, [msg(id, LATER, payload=b"new")], REPLACE, NOW),
        )
        # then either the pass took the old one and the replace was refused,
        # or the replace won and nothing was delivered before its new time
        if ids(leases) == [id]:
            assert status == LEASED
        else:
            assert (ids(leases), status) == ([], REPLACED)
            assert (await storage.get(T, id)).timestamp == LATER


async def test_counts_and_keys_follow_replaces_and_extends(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(
        storage,
        *(msg(f"m{i}", NOW - 10, key="k1") for i in range(4)),
        msg("x", NOW + 10),
    )
    # when two due ones move later, one under another key, and a waiting one comes due
    await storage.insert(T, [msg("m0", LATER, key="k2")], REPLACE, NOW)
    await storage.insert(T, [msg("m1", LATER), msg("x", NOW - 5)], EXTEND, NOW)
    # then the counts and the busiest keys say so
    assert await storage.counts(T, NOW) == Counts(waiting=2, due=3)
    assert [(k.key, k.due) for k in await storage.keys(T, NOW, 10)] == [("k1", 2)]
    assert [(k.key, k.due) for k in await storage.keys(T, LATER, 10)] == [("k1", 3), ("k2", 1)]
    assert sorted(ids(await lease(storage, NOW))) == ["m2", "m3", "x"]
