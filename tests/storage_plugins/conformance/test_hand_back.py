"""Handing back leases taken ahead and never sent (the broker's look-ahead)."""

from __future__ import annotations

from dejaq.core.errors import NotFound, NotLeaseHolder, StaleVersion
from dejaq.core.model import Settled
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    C1,
    C2,
    NOW,
    T,
    given_messages,
    given_topic,
    ids,
    lease,
    msg,
)


async def test_a_handed_back_message_is_due_at_its_own_time_again_uncounted(
    storage: Storage,
) -> None:
    # given messages taken 10 ms ahead of their due times
    await given_topic(storage)
    await given_messages(storage, msg("a", NOW + 5), msg("b", NOW + 8, bucket=1))
    taken = (await lease(storage, horizon_ms=10)).delivered
    # when the broker hands them back, never sent
    outcomes = await storage.hand_back(T, [(d.id, d.version, d.timestamp) for d in taken], C1)
    # then each is back at its due time, unowned, that delivery uncounted
    assert outcomes == [Settled("a", 3, NOW + 5), Settled("b", 3, NOW + 8)]
    a = await storage.get(T, "a")
    assert (a.timestamp, a.lease_owner, a.deliveries, a.version) == (NOW + 5, None, 0, 3)
    # and nothing is due before its millisecond
    assert ids(await lease(storage, NOW + 4, owner=C2)) == []
    again = (await lease(storage, NOW + 8, owner=C2)).delivered
    assert [(d.id, d.deliveries) for d in again] == [("a", 1), ("b", 1)]


async def test_a_hand_back_is_refused_like_a_settle_and_changes_nothing(
    storage: Storage,
) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", NOW + 5), msg("once", NOW + 5, max_deliveries=1))
    taken = {d.id: d for d in (await lease(storage, horizon_ms=10)).delivered}
    d = taken["m"]  # and "once", deleted as it was taken (at-most-once)
    items = [("m", d.version - 1, NOW + 5), ("m", d.version, NOW + 5), ("x", 1, NOW)]
    stale, other, gone, once = await storage.hand_back(T, [*items, ("once", 1, NOW + 5)], C2)
    assert isinstance(stale, NotLeaseHolder)  # C2 never held it
    assert isinstance(other, NotLeaseHolder)
    assert isinstance(gone, NotFound)
    assert isinstance(once, NotFound)
    [stale] = await storage.hand_back(T, [("m", d.version - 1, NOW + 5)], C1)
    assert isinstance(stale, StaleVersion)
    m = await storage.get(T, "m")
    assert (m.lease_owner, m.version, m.deliveries) == (C1, d.version, 1)


async def test_a_handed_back_last_delivery_is_still_delivered(storage: Storage) -> None:
    # given a message on its last allowed delivery, taken ahead
    await given_topic(storage)
    await given_messages(storage, msg("m", NOW + 5, max_deliveries=2))
    [first] = (await lease(storage, horizon_ms=10)).delivered
    await storage.nack(T, [(first.id, first.version)], C1, NOW + 6, 0)
    [second] = (await lease(storage, NOW + 1, horizon_ms=10)).delivered
    assert second.deliveries == 2
    # when handed back, it is not dead: the next pass delivers it as the second
    await storage.hand_back(T, [(second.id, second.version, second.timestamp)], C1)
    [third] = (await lease(storage, NOW + 6, owner=C2)).delivered
    assert (third.id, third.deliveries) == ("m", 2)
