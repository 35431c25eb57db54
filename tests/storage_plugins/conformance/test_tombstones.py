"""Tombstones: a deleted message's id stays taken for the topic's dedup window."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import Counts
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    ACCEPTED,
    C1,
    DUPLICATE,
    NOW,
    T,
    given_dead,
    given_leased,
    given_messages,
    given_topic,
    ids,
    lease,
    msg,
)

LATER = NOW + 10_000


async def test_an_acked_id_is_a_duplicate_and_stores_nothing(storage: Storage) -> None:
    versions = await given_leased(storage, "a", "b")
    await storage.ack(T, [("a", versions["a"]), ("b", versions["b"])], C1, NOW)

    statuses = await storage.insert(T, [msg("a", LATER), msg("b", LATER), msg("c", LATER)])

    assert statuses == [DUPLICATE, DUPLICATE, ACCEPTED]
    with pytest.raises(NotFound):
        await storage.get(T, "a")
    assert await storage.counts(T, LATER) == Counts(due=1)
    assert ids(await lease(storage, LATER)) == ["c"]


async def test_a_cancelled_id_is_a_duplicate(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", LATER))
    await storage.cancel(T, "m", 1, NOW)

    assert await storage.insert(T, [msg("m", LATER)]) == [DUPLICATE]
    assert ids(await lease(storage, LATER)) == []


async def test_an_at_most_once_delivery_is_not_delivered_again_by_a_resend(
    storage: Storage,
) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("once", max_deliveries=1))
    assert ids(await lease(storage)) == ["once"]

    assert await storage.insert(T, [msg("once", LATER)]) == [DUPLICATE]
    assert ids(await lease(storage, LATER)) == []


async def test_a_tombstone_is_not_a_message(storage: Storage) -> None:
    versions = await given_leased(storage, "m")
    await storage.ack(T, [("m", versions["m"])], C1, NOW)

    [outcome] = await storage.ack(T, [("m", versions["m"])], C1, NOW)
    assert isinstance(outcome, NotFound)
    with pytest.raises(NotFound):
        await storage.cancel(T, "m", versions["m"], NOW)
    assert await storage.counts(T, NOW) == Counts()
    assert [m.id for b in range(4) for m in (await storage.scan(T, b, "", 10)).messages] == []
    assert await storage.redrive(T, ["m"], NOW) == 0


async def test_purged_tombstones_free_their_ids_in_bounded_batches(storage: Storage) -> None:
    await given_topic(storage)
    names = [f"m{i}" for i in range(5)]
    await given_messages(storage, *(msg(n, LATER) for n in names))
    for n in names[:3]:
        await storage.cancel(T, n, 1, NOW)
    for n in names[3:]:
        await storage.cancel(T, n, 1, NOW + 500)

    assert await storage.purge_tombstones(T, NOW + 1, 2) == 2
    assert await storage.purge_tombstones(T, NOW + 1, 2) == 1
    assert await storage.purge_tombstones(T, NOW + 1, 2) == 0

    statuses = await storage.insert(T, [msg(n, LATER) for n in names])
    assert statuses == [ACCEPTED] * 3 + [DUPLICATE] * 2


async def test_purging_tombstones_needs_a_positive_limit(storage: Storage) -> None:
    await given_topic(storage)
    with pytest.raises(InvalidArgument):
        await storage.purge_tombstones(T, NOW, 0)


async def test_without_a_window_a_deleted_id_is_free_at_once(storage: Storage) -> None:
    await given_topic(storage, dedup_window_ms=0)
    await given_messages(storage, msg("m"))
    [d] = (await lease(storage)).delivered
    await storage.ack(T, [("m", d.version)], C1, NOW)

    assert await storage.insert(T, [msg("m", LATER)]) == [ACCEPTED]
    assert await storage.purge_tombstones(T, LATER, 10) == 0


async def test_a_purged_dead_message_leaves_no_tombstone(storage: Storage) -> None:
    await given_dead(storage, "d")
    assert await storage.purge_dead(T, NOW + 1) == 1

    assert await storage.insert(T, [msg("d", LATER)]) == [ACCEPTED]


async def test_deleting_the_topic_forgets_its_tombstones(storage: Storage) -> None:
    versions = await given_leased(storage, "m")
    await storage.ack(T, [("m", versions["m"])], C1, NOW)
    await storage.delete_topic(T)
    await given_topic(storage)

    assert await storage.insert(T, [msg("m", LATER)]) == [ACCEPTED]
    assert await storage.purge_tombstones(T, LATER, 10) == 0


async def test_tombstones_are_per_topic(storage: Storage) -> None:
    versions = await given_leased(storage, "m")
    await storage.ack(T, [("m", versions["m"])], C1, NOW)
    await given_topic(storage, "other")

    assert await storage.insert("other", [msg("m", LATER)]) == [ACCEPTED]


async def test_forgetting_the_tombstones_of_ids_frees_them_at_once(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("once", max_deliveries=1), msg("kept", LATER))
    assert ids(await lease(storage)) == ["once"]

    assert await storage.forget_tombstones(T, ["once", "kept", "never"]) == 1

    assert await storage.insert(T, [msg("once", LATER), msg("kept", LATER)]) == [
        ACCEPTED,
        DUPLICATE,
    ]
    assert await storage.forget_tombstones(T, ["once"]) == 0
