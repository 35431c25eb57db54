"""Races, many buckets, and several instances on one store."""

from __future__ import annotations

import asyncio
import time

import pytest

from dejaq.core.buckets import Buckets
from dejaq.core.errors import (
    DejaqError,
    Leased,
    NotFound,
    NotLeaseHolder,
    StaleVersion,
)
from dejaq.core.model import Counts, Settled
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    ACCEPTED,
    C1,
    C2,
    LEASE,
    NOW,
    T,
    given_leased,
    given_messages,
    given_topic,
    ids,
    lease,
    msg,
)

# -- concurrency --------------------------------------------------------------


async def all_taken(
    storage: Storage, taken: list[str], total: int, buckets: Buckets = None
) -> list[str]:
    """``taken``, then what later passes take, until ``total`` ids are taken (10 s
    at most). On a Redis Cluster a master answering more than 200 ms after the
    others (a loaded host) has its share of a pass handed back once it answers,
    for a later pass: nobody got it, and nobody may get it twice."""
    deadline = time.monotonic() + 10
    while len(set(taken)) < total and time.monotonic() < deadline:
        taken = taken + ids(await lease(storage, limit=1000, owner="later", buckets=buckets))
    return taken


async def test_concurrent_leases_never_share_a_message(storage: Storage) -> None:
    # given 1,000 due messages over 16 buckets
    await given_topic(storage, buckets=16)
    await given_messages(storage, *(msg(f"m{i:04d}", NOW - i, bucket=i % 16) for i in range(1000)))
    # when eight consumers lease at once
    results = await asyncio.gather(*(lease(storage, limit=200, owner=f"c{k}") for k in range(8)))
    # then every message went to exactly one of them
    taken = await all_taken(storage, [id for leases in results for id in ids(leases)], 1000)
    assert len(taken) == len(set(taken)) == 1000


@pytest.mark.parametrize("ack_first", [True, False], ids=["ack-first", "lease-first"])
async def test_a_lease_racing_an_ack_resolves_by_version(storage: Storage, ack_first: bool) -> None:
    # given a lease of C1 that has just expired
    versions = await given_leased(storage, "m", owner=C1)
    now = NOW + LEASE
    ack = storage.ack(T, [("m", versions["m"])], C1, now)
    relet = lease(storage, now, owner=C2)
    # when C1 acks while C2 leases
    if ack_first:
        [outcome], leases = await asyncio.gather(ack, relet)
    else:
        leases, [outcome] = await asyncio.gather(relet, ack)
    # then exactly one of them wins
    acked = isinstance(outcome, Settled)
    assert acked != bool(leases.delivered)
    if acked:
        with pytest.raises(NotFound):
            await storage.get(T, "m")
    else:
        assert isinstance(outcome, NotLeaseHolder | StaleVersion)
        assert (await storage.get(T, "m")).lease_owner == C2


@pytest.mark.parametrize("move_first", [True, False], ids=["move-first", "lease-first"])
async def test_a_lease_racing_a_move_resolves_by_version(
    storage: Storage, move_first: bool
) -> None:
    # given a due message
    await given_topic(storage)
    await given_messages(storage, msg("m"))

    async def move() -> Settled | DejaqError:
        try:
            return await storage.move(T, "m", 1, NOW + 50, NOW)
        except DejaqError as exc:
            return exc

    # when the producer moves it while a consumer leases it
    if move_first:
        moved, leases = await asyncio.gather(move(), lease(storage))
    else:
        leases, moved = await asyncio.gather(lease(storage), move())
    # then exactly one of them wins
    assert isinstance(moved, Settled) != bool(leases.delivered)
    m = await storage.get(T, "m")
    if isinstance(moved, Settled):
        assert (m.timestamp, m.lease_owner) == (NOW + 50, None)
    else:
        assert isinstance(moved, Leased | StaleVersion)
        assert (m.timestamp, m.lease_owner) == (NOW + LEASE, C1)


# -- many buckets, several instances --------------------------------------------


@pytest.mark.parametrize("buckets", [None, range(16, 48)], ids=["all-buckets", "some-buckets"])
async def test_passes_over_many_buckets_take_the_earliest_first_and_nothing_early(
    storage: Storage, buckets: range | None
) -> None:
    # given 64 buckets holding 1,000 due messages with distinct timestamps, shuffled
    # across the buckets (i -> i * 7919 mod 5001 is a permutation), and 200 more
    # due one by one after now
    await given_topic(storage, buckets=64)
    stamps = [NOW - 5_000 + i * 7919 % 5001 for i in range(1000)] + list(range(NOW + 1, NOW + 201))
    messages = [msg(f"m{i:04d}", ts, bucket=i * 37 % 64) for i, ts in enumerate(stamps)]
    await given_messages(storage, *messages)
    mine = [m for m in messages if buckets is None or m.bucket in buckets]
    due = sorted((m for m in mine if m.timestamp <= NOW), key=lambda m: m.timestamp)
    # when a dispatcher makes passes of 37 until one comes back short
    got: list[tuple[str, int]] = []
    while True:
        leases = await lease(storage, NOW, limit=37, buckets=buckets)
        got += [(d.id, d.timestamp) for d in leases.delivered]
        if len(leases.delivered) < 37:
            break
    # then every due message came once, earliest first across buckets, none early
    assert got == [(m.id, m.timestamp) for m in due]
    later = min(m.timestamp for m in mine if m.timestamp > NOW)
    assert await storage.next_due(T, buckets) == later
    # and the later ones come when their time does, one millisecond at a time
    assert ids(await lease(storage, later - 1, buckets=buckets)) == []
    assert [d.timestamp for d in (await lease(storage, later, buckets=buckets)).delivered] == [
        later
    ]


@pytest.mark.parametrize("buckets", [None, list(range(8))], ids=["whole-topic", "buckets"])
async def test_two_instances_on_one_store_never_lease_the_same_message(
    two_storages: tuple[Storage, Storage], buckets: list[int] | None
) -> None:
    # given two storage instances on one store, as two brokers would have,
    # and 1,000 due messages over 8 buckets
    one, two = two_storages
    await given_topic(one, buckets=8)
    batch = [msg(f"m{i:04d}", NOW - i, bucket=i % 8) for i in range(1000)]
    assert await one.insert(T, batch) == [ACCEPTED] * 1000
    # when both lease at once, six consumers each
    results = await asyncio.gather(
        *(
            lease(storage, limit=100, owner=f"c{k}", buckets=buckets)
            for k in range(6)
            for storage in (one, two)
        )
    )
    # then each message went to exactly one consumer, and none was left behind
    taken = await all_taken(two, [id for leases in results for id in ids(leases)], 1000, buckets)
    assert len(taken) == len(set(taken)) == 1000
    assert await two.counts(T, NOW) == Counts(leased=1000)


async def test_instances_sharing_one_store_never_share_a_keyed_message(
    two_storages: tuple[Storage, Storage],
) -> None:
    # given two storage instances on one store, and 1,000 due messages of 10
    # keys over 8 buckets, one key holding half of them
    one, two = two_storages
    await given_topic(one, buckets=8)
    batch = [
        msg(f"m{i:04d}", NOW - i, bucket=i % 8, key="big" if i % 2 else f"k{i % 9}")
        for i in range(1000)
    ]
    assert await one.insert(T, batch) == [ACCEPTED] * 1000
    # when both lease at once, six consumers each, then once more until none is due
    results = await asyncio.gather(
        *(lease(storage, limit=50, owner=f"c{k}") for k in range(6) for storage in (one, two))
    )
    taken = await all_taken(two, [id for leases in results for id in ids(leases)], 1000)
    # then each message went to exactly one consumer, and none was left behind
    assert len(taken) == len(set(taken)) == 1000
    assert await one.counts(T, NOW) == Counts(leased=1000)
