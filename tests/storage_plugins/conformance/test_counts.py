"""Counts by state follow every write: each way a message comes, dies, comes
back or goes, and a topic deleted and created again under its name."""

from __future__ import annotations

from dejaq.core.model import Counts
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    C1,
    LEASE,
    NOW,
    T,
    given_messages,
    given_topic,
    lease,
    msg,
)


async def test_counts_follow_deliveries_deaths_redrives_and_deletes(storage: Storage) -> None:
    # Given a topic with messages due now, due later, one at most once
    await given_topic(storage)
    await given_messages(
        storage,
        msg("ack", NOW - 5),
        msg("nack", NOW - 4, max_deliveries=1 + 1),
        msg("once", NOW - 3, max_deliveries=1),
        msg("expired", NOW - 2, expires_at=1),
        msg("cancel", NOW + 10 * LEASE),
        msg("later", NOW + 20 * LEASE),
    )
    assert await storage.counts(T, NOW) == Counts(waiting=2, due=4)
    # When a pass leases three, drops the at-most-once one and kills the expired one
    leases = await lease(storage, NOW)
    versions = {d.id: d.version for d in leases.delivered}
    assert await storage.counts(T, NOW) == Counts(waiting=2, leased=2, dead=1)
    # and one is acked, the other nacked then leased again and nacked to death
    await storage.ack(T, [("ack", versions["ack"])], C1, NOW)
    await storage.nack(T, [("nack", versions["nack"])], C1, NOW, 0)
    again = {d.id: d.version for d in (await lease(storage, NOW)).delivered}
    await storage.nack(T, [("nack", again["nack"])], C1, NOW, 0)
    assert await storage.counts(T, NOW) == Counts(waiting=2, dead=2)
    # and one waiting is cancelled, the dead are redriven, then one killed again is purged
    await storage.cancel(T, "cancel", 1, NOW)
    assert await storage.redrive(T, None, NOW) == 2
    assert await storage.counts(T, NOW) == Counts(waiting=1, due=2)
    gone = {d.id: d.version for d in (await lease(storage, NOW)).delivered}
    await storage.nack(T, [("expired", gone["expired"])], C1, NOW, 1)  # out of deliveries
    assert await storage.purge_dead(T, NOW + 1) == 1
    # Then the counts are those of what is left
    assert await storage.counts(T, NOW + 2 * LEASE) == Counts(waiting=1, due=1)
    census = await storage.census(NOW + 2 * LEASE)
    assert census[T].counts == Counts(waiting=1, due=1)


async def test_a_topic_created_again_starts_from_no_messages(storage: Storage) -> None:
    # Given a topic holding live and dead messages
    await given_topic(storage)
    await given_messages(storage, msg("dies", NOW, expires_at=1), msg("waits", NOW + LEASE))
    await lease(storage, NOW)
    assert await storage.counts(T, NOW) == Counts(waiting=1, dead=1)
    # When it is deleted and created again under its name
    await storage.delete_topic(T)
    await given_topic(storage)
    # Then it counts nothing, and what it is given next
    assert await storage.counts(T, NOW) == Counts()
    assert (await storage.census(NOW))[T].counts == Counts()
    await given_messages(storage, msg("new", NOW + LEASE))
    assert await storage.counts(T, NOW) == Counts(waiting=1)
