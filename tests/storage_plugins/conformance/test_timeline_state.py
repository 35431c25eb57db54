"""next_due, release, counts, and the dead timeline."""

from __future__ import annotations

import pytest

from dejaq.core.errors import (
    NotFound,
)
from dejaq.core.model import Counts
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    ACCEPTED,
    C1,
    C2,
    LEASE,
    NOW,
    T,
    given_dead,
    given_every_state,
    given_leased,
    given_messages,
    given_topic,
    ids,
    lease,
    msg,
)

# -- next_due -----------------------------------------------------------------


async def test_next_due_is_none_for_an_empty_timeline(storage: Storage) -> None:
    await given_topic(storage)
    assert await storage.next_due(T, None) is None


async def test_next_due_is_the_earliest_timestamp_of_the_buckets(storage: Storage) -> None:
    await given_topic(storage, buckets=4)
    await given_messages(storage, msg("a", NOW + 30, bucket=0), msg("b", NOW + 10, bucket=2))
    assert await storage.next_due(T, None) == NOW + 10
    assert await storage.next_due(T, [0, 1]) == NOW + 30
    assert await storage.next_due(T, [1, 3]) is None
    assert await storage.next_due(T, []) is None


async def test_next_due_includes_lease_expiry_and_skips_the_dead(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("leased", NOW), msg("dead", NOW - 1, expires_at=1))
    await lease(storage)
    assert await storage.next_due(T, None) == NOW + LEASE


# -- release ------------------------------------------------------------------


async def test_release_makes_the_owners_leases_due_now(storage: Storage) -> None:
    # given two messages leased by C1 and one by C2
    await given_topic(storage)
    await given_messages(storage, msg("a", NOW - 3), msg("b", NOW - 2), msg("c", NOW - 1))
    await lease(storage, limit=2, owner=C1)
    await lease(storage, limit=1, owner=C2)
    # when C1 disconnects cleanly
    assert await storage.release(T, C1, NOW + 1) == 2
    # then its messages are due at that time, unowned, with a new version
    for id in ("a", "b"):
        m = await storage.get(T, id)
        assert (m.timestamp, m.lease_owner, m.version) == (NOW + 1, None, 3)
    # and C2's lease is untouched
    c = await storage.get(T, "c")
    assert (c.timestamp, c.lease_owner, c.version) == (NOW + LEASE, C2, 2)
    assert ids(await lease(storage, NOW + 1, owner=C2)) == ["a", "b"]


async def test_release_of_an_unknown_owner_or_topic_releases_nothing(storage: Storage) -> None:
    await given_leased(storage, "m")
    assert await storage.release(T, C2, NOW) == 0
    assert await storage.release("nowhere", C1, NOW) == 0


# -- counts -------------------------------------------------------------------


async def test_counts_cover_every_state(storage: Storage) -> None:
    await given_every_state(storage)
    assert await storage.counts(T, NOW + LEASE) == Counts(waiting=1, due=2, leased=1, dead=1)


# -- the dead timeline --------------------------------------------------------


async def test_list_dead_pages_by_id(storage: Storage) -> None:
    await given_dead(storage, "d3", "d1", "d5", "d2", "d4")
    await given_messages(storage, msg("alive"))
    page = await storage.list_dead(T, "", 2)
    assert [m.id for m in page] == ["d1", "d2"]
    assert all(m.dead and m.payload == m.id.encode() for m in page)
    assert [m.id for m in await storage.list_dead(T, "d2", 2)] == ["d3", "d4"]
    assert [m.id for m in await storage.list_dead(T, "d4", 2)] == ["d5"]
    assert await storage.list_dead(T, "d5", 2) == []


async def test_redrive_all_puts_the_dead_back_live(storage: Storage) -> None:
    await given_dead(storage, "a", "b")
    assert await storage.redrive(T, None, NOW + 5) == 2
    for id in ("a", "b"):
        m = await storage.get(T, id)
        assert (m.dead, m.deliveries, m.timestamp, m.lease_owner) == (False, 0, NOW + 5, None)
        assert m.version == 3  # inserted 1, died 2, redriven 3
    assert await storage.counts(T, NOW) == Counts(waiting=2)
    assert await storage.redrive(T, None, NOW) == 0


async def test_redrive_some_ids_ignores_the_unknown_and_the_live(storage: Storage) -> None:
    await given_dead(storage, "a", "b", "c")
    await given_messages(storage, msg("live", NOW + 1))
    assert await storage.redrive(T, ["a", "c", "ghost", "live", "a"], NOW) == 2
    assert [m.id for m in await storage.list_dead(T, "", 10)] == ["b"]
    assert (await storage.get(T, "live")).version == 1
    assert await storage.counts(T, NOW) == Counts(waiting=1, due=2, dead=1)


async def test_a_redriven_message_starts_its_deliveries_again(storage: Storage) -> None:
    # given a message dead-lettered after two deliveries
    await given_topic(storage)
    await given_messages(storage, msg("m"))
    for now in (NOW, NOW + LEASE):
        await lease(storage, now, max_deliveries=2)
    died = NOW + 2 * LEASE
    assert (await lease(storage, died, max_deliveries=2)).dead_lettered == 1
    # when it is redriven, then it is delivered again as a first delivery
    assert await storage.redrive(T, ["m"], died) == 1
    [d] = (await lease(storage, died, max_deliveries=2)).delivered
    assert (d.id, d.timestamp, d.deliveries) == ("m", died, 1)


async def test_purge_dead_deletes_only_the_older_dead(storage: Storage) -> None:
    await given_dead(storage, "old", died_at=NOW)
    await given_messages(storage, msg("young", NOW + 10, expires_at=1), msg("live", NOW + 10))
    assert (await lease(storage, NOW + 10, owner=C2)).dead_lettered == 1
    assert await storage.purge_dead(T, NOW + 10) == 1
    assert [m.id for m in await storage.list_dead(T, "", 10)] == ["young"]
    with pytest.raises(NotFound):
        await storage.get(T, "old")
    assert await storage.insert(T, [msg("old")]) == [ACCEPTED]
