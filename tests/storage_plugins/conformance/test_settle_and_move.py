"""Ack, extend, nack by the holder; move and cancel by the producer."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from dejaq.core.errors import (
    Leased,
    NotFound,
    NotLeaseHolder,
    StaleVersion,
)
from dejaq.core.model import Counts, Settled
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
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

# -- ack / extend / nack ------------------------------------------------------


async def test_ack_by_the_holder_deletes(storage: Storage) -> None:
    versions = await given_leased(storage, "m")
    assert await storage.ack(T, [("m", versions["m"])], C1, NOW) == [Settled("m", 0, NOW + LEASE)]
    with pytest.raises(NotFound):
        await storage.get(T, "m")
    assert ids(await lease(storage, NOW + LEASE)) == []


async def test_a_stale_ack_is_refused_and_changes_nothing(storage: Storage) -> None:
    versions = await given_leased(storage, "m")
    before = await storage.get(T, "m")
    [outcome] = await storage.ack(T, [("m", versions["m"] - 1)], C1, NOW)
    assert isinstance(outcome, StaleVersion)
    assert await storage.get(T, "m") == before


async def test_ack_by_another_consumer_is_refused(storage: Storage) -> None:
    versions = await given_leased(storage, "m", owner=C1)
    before = await storage.get(T, "m")
    [outcome] = await storage.ack(T, [("m", versions["m"])], C2, NOW)
    assert isinstance(outcome, NotLeaseHolder)
    assert await storage.get(T, "m") == before


async def test_ack_of_a_never_leased_message_is_refused(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m"))
    [outcome] = await storage.ack(T, [("m", 1)], C1, NOW)
    assert isinstance(outcome, NotLeaseHolder)


async def test_a_batch_ack_reports_each_item_in_order(storage: Storage) -> None:
    versions = await given_leased(storage, "a", "b")
    outcomes = await storage.ack(
        T, [("a", versions["a"]), ("ghost", 1), ("b", 99), ("a", versions["a"])], C1, NOW
    )
    assert outcomes[0] == Settled("a", 0, NOW + LEASE)
    assert isinstance(outcomes[1], NotFound)
    assert isinstance(outcomes[2], StaleVersion)
    assert isinstance(outcomes[3], NotFound)  # already acked by the first item
    assert (await storage.get(T, "b")).version == versions["b"]


async def test_a_batch_ack_of_distinct_ids_mixes_acks_and_refusals_in_item_order(
    storage: Storage,
) -> None:
    # given a, b, c leased by C1 and d by C2
    versions = await given_leased(storage, "a", "b", "c")
    await given_messages(storage, msg("d"))
    [d] = (await lease(storage, owner=C2)).delivered
    # when C1 acks them all, some at a wrong version, and one that never was
    items = [("b", 99), ("a", versions["a"]), ("ghost", 1), ("d", d.version)]
    outcomes = await storage.ack(T, [*items, ("c", versions["c"])], C1, NOW)
    # then each item has its own outcome, in the order given
    assert isinstance(outcomes[0], StaleVersion)
    assert outcomes[1] == Settled("a", 0, NOW + LEASE)
    assert isinstance(outcomes[2], NotFound)
    assert isinstance(outcomes[3], NotLeaseHolder)
    assert outcomes[4] == Settled("c", 0, NOW + LEASE)
    # and only the acked are gone; the refused are untouched
    for gone in ("a", "c"):
        with pytest.raises(NotFound):
            await storage.get(T, gone)
    assert (await storage.get(T, "b")).version == versions["b"]
    assert (await storage.get(T, "d")).lease_owner == C2


async def test_extend_pushes_the_lease(storage: Storage) -> None:
    versions = await given_leased(storage, "m")
    until = NOW + 10 * LEASE
    [outcome] = await storage.extend(T, [("m", versions["m"])], C1, until)
    assert outcome == Settled("m", versions["m"] + 1, until)
    m = await storage.get(T, "m")
    assert (m.timestamp, m.lease_owner, m.version) == (until, C1, versions["m"] + 1)
    assert ids(await lease(storage, NOW + LEASE, owner=C2)) == []
    [stale] = await storage.extend(T, [("m", versions["m"])], C1, until + 1)
    assert isinstance(stale, StaleVersion)


async def test_nack_reschedules_and_clears_the_owner(storage: Storage) -> None:
    versions = await given_leased(storage, "m")
    at = NOW + 500
    [outcome] = await storage.nack(T, [("m", versions["m"])], C1, at, 0)
    assert outcome == Settled("m", versions["m"] + 1, at)
    m = await storage.get(T, "m")
    assert (m.timestamp, m.lease_owner, m.dead) == (at, None, False)
    assert await storage.counts(T, NOW) == Counts(waiting=1)
    assert ids(await lease(storage, at - 1)) == []
    [d] = (await lease(storage, at, owner=C2)).delivered
    assert (d.id, d.deliveries) == ("m", 2)


async def test_nack_on_the_last_allowed_delivery_dead_letters(storage: Storage) -> None:
    # given a message on its second and last allowed delivery
    await given_topic(storage)
    await given_messages(storage, msg("m"))
    [first] = (await lease(storage, max_deliveries=2)).delivered
    await storage.nack(T, [("m", first.version)], C1, NOW + 1, 2)
    [second] = (await lease(storage, NOW + 1, max_deliveries=2)).delivered
    assert second.deliveries == 2
    # when it is nacked, then it goes to the dead timeline
    at = NOW + 100
    assert await storage.nack(T, [("m", second.version)], C1, at, 2) == [Settled("m", 0, at)]
    m = await storage.get(T, "m")
    assert (m.dead, m.lease_owner, m.timestamp) == (True, None, at)
    assert await storage.next_due(T, None) is None


# -- move / cancel ------------------------------------------------------------


async def test_move_reschedules_a_waiting_message(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", NOW, payload=b"keep"))
    assert await storage.move(T, "m", 1, NOW + 50, NOW) == Settled("m", 2, NOW + 50)
    assert ids(await lease(storage, NOW)) == []
    m = await storage.get(T, "m")
    assert (m.timestamp, m.version, m.payload) == (NOW + 50, 2, b"keep")
    assert ids(await lease(storage, NOW + 50)) == ["m"]


async def test_a_move_with_a_payload_replaces_it_in_the_same_step(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", NOW, payload=b"old"), msg("n", NOW, payload=b"other"))
    long = b"new and much longer than before " * 40
    assert await storage.move(T, "m", 1, NOW + 50, NOW, long) == Settled("m", 2, NOW + 50)
    m = await storage.get(T, "m")
    assert (m.timestamp, m.version, m.payload) == (NOW + 50, 2, long)
    assert (await storage.get(T, "n")).payload == b"other"
    # a refused move (stale version) keeps the payload
    with pytest.raises(StaleVersion):
        await storage.move(T, "m", 1, NOW, NOW, b"lost")
    assert (await storage.get(T, "m")).payload == long
    leased = {d.id: d.payload for d in (await lease(storage, NOW + 50)).delivered}
    assert leased == {"m": long, "n": b"other"}


async def test_cancel_deletes_a_waiting_message(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", NOW + 5))
    assert await storage.cancel(T, "m", 1, NOW) == Settled("m", 0, NOW + 5)
    with pytest.raises(NotFound):
        await storage.get(T, "m")


MUTATIONS: dict[str, Callable[[Storage, int, int], Awaitable[Settled]]] = {
    "move": lambda s, version, now: s.move(T, "m", version, now + 5, now),
    "cancel": lambda s, version, now: s.cancel(T, "m", version, now),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
async def test_a_message_under_a_live_lease_cannot_be_moved(
    storage: Storage, mutation: str
) -> None:
    versions = await given_leased(storage, "m")
    before = await storage.get(T, "m")
    with pytest.raises(Leased):
        await MUTATIONS[mutation](storage, versions["m"], NOW + LEASE - 1)
    assert await storage.get(T, "m") == before


@pytest.mark.parametrize("mutation", list(MUTATIONS))
async def test_a_message_whose_lease_expired_can_be_moved(storage: Storage, mutation: str) -> None:
    versions = await given_leased(storage, "m")
    await MUTATIONS[mutation](storage, versions["m"], NOW + LEASE)
    if mutation == "move":
        m = await storage.get(T, "m")
        assert (m.timestamp, m.lease_owner, m.version) == (NOW + LEASE + 5, None, versions["m"] + 1)
    else:
        with pytest.raises(NotFound):
            await storage.get(T, "m")


@pytest.mark.parametrize("mutation", list(MUTATIONS))
async def test_a_stale_move_is_refused(storage: Storage, mutation: str) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m"))
    await storage.move(T, "m", 1, NOW + 1, NOW)
    with pytest.raises(StaleVersion):
        await MUTATIONS[mutation](storage, 1, NOW)
    assert (await storage.get(T, "m")).version == 2


@pytest.mark.parametrize("mutation", list(MUTATIONS))
async def test_moving_an_unknown_or_dead_message_is_not_found(
    storage: Storage, mutation: str
) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("dead", expires_at=1))
    await lease(storage)
    version = (await storage.get(T, "dead")).version
    with pytest.raises(NotFound):
        await MUTATIONS[mutation](storage, 1, NOW)  # "m" was never produced
    with pytest.raises(NotFound):
        await storage.move(T, "dead", version, NOW, NOW)
    with pytest.raises(NotFound):
        await storage.cancel(T, "dead", version, NOW)
