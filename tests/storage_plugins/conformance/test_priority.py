"""Priority topics: an available message sits at its rank (a negative timestamp,
core/priority.py), so a lease pass takes the most urgent first, FIFO within a
priority; ``promote`` ranks the messages that became available."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from dejaq.core import priority as prio
from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import (
    KIND_PRIORITY,
    Counts,
    Leases,
    NewMessage,
    Settled,
    Topic,
    TopicSettings,
)
from dejaq.storage_plugins import Storage
from dejaq.storage_plugins.base import Head, TopicCensus
from tests.storage_plugins.conformance import givens
from tests.storage_plugins.conformance.givens import (
    C1,
    C2,
    DUPLICATE,
    LEASE,
    given_messages,
    given_topic,
    ids,
)

P = "jobs"
CREATED = 1_763_900_000_000  # a topic created at a realistic epoch ms
NOW = CREATED + 3_600_000


async def given_priority_topic(
    storage: Storage,
    *,
    priorities: int = 10,
    aging_ms: int = 0,
    created_at_ms: int = CREATED,
    buckets: int = 4,
    dedup_window_ms: int = 0,
) -> Topic:
    settings = TopicSettings(
        buckets=buckets,
        lease_ms=LEASE,
        dedup_window_ms=dedup_window_ms,
        kind=KIND_PRIORITY,
        priorities=priorities,
        aging_ms=aging_ms,
    )
    topic = Topic(P, settings, created_at_ms)
    await storage.create_topic(topic)
    return topic


def ranked(
    topic: Topic,
    id: str,
    priority: int,
    available_at: int = NOW,
    bucket: int = 0,
    expires_at: int = 0,
    max_deliveries: int = 0,
) -> NewMessage:
    """A message available since ``available_at``, at its rank (as the broker produces it)."""
    at = prio.rank(topic, priority, available_at)
    return NewMessage(id, at, id.encode(), bucket, max_deliveries, expires_at, priority)


def pending(id: str, priority: int, not_before: int, bucket: int = 0) -> NewMessage:
    """A message not available before ``not_before`` (an ordinary timestamp)."""
    return NewMessage(id, not_before, id.encode(), bucket, 0, 0, priority)


async def given(storage: Storage, *messages: NewMessage) -> None:
    await given_messages(storage, *messages, topic=P)


async def lease(storage: Storage, now: int = NOW, **options: Any) -> Leases:
    """``givens.lease`` on the priority topic, by default at this module's ``NOW``."""
    return await givens.lease(storage, now, topic=P, **options)


async def timestamps(storage: Storage, names: Sequence[str]) -> dict[str, int]:
    return {n: (await storage.get(P, n)).timestamp for n in names}


# -- order ---------------------------------------------------------------------


async def test_most_urgent_first_then_fifo_within_a_priority(storage: Storage) -> None:
    topic = await given_priority_topic(storage)
    await given(
        storage,
        ranked(topic, "low-old", 7, NOW - 500, bucket=1),
        ranked(topic, "top-late", 0, NOW - 10, bucket=2),
        ranked(topic, "mid", 3, NOW - 300, bucket=3),
        ranked(topic, "top-early", 0, NOW - 20),
        ranked(topic, "low-new", 7, NOW - 1, bucket=2),
    )
    first = (await lease(storage, limit=1)).delivered
    assert [(d.id, d.priority) for d in first] == [("top-early", 0)]
    assert first[0].timestamp == prio.rank(topic, 0, NOW - 20)
    rest = await lease(storage, owner=C2)
    assert ids(rest) == ["top-late", "mid", "low-old", "low-new"]
    assert [d.priority for d in rest.delivered] == [0, 3, 7, 7]
    assert [d.deliveries for d in rest.delivered] == [1, 1, 1, 1]


async def test_the_priority_is_stored_and_read_back(storage: Storage) -> None:
    topic = await given_priority_topic(storage)
    await given(storage, ranked(topic, "m", 6, bucket=1), pending("p", 4, NOW + 50, bucket=1))
    m = await storage.get(P, "m")
    assert (m.priority, m.timestamp, m.version) == (6, prio.rank(topic, 6, NOW), 1)
    assert (await storage.get(P, "p")).priority == 4
    page = await storage.scan(P, 1, "", 10)
    assert [(x.id, x.priority) for x in page.messages] == [("m", 6), ("p", 4)]


async def test_a_timeline_message_has_priority_zero(storage: Storage) -> None:
    await given_topic(storage, "timeline")
    await storage.insert("timeline", [NewMessage("t", NOW, b"x", 0)])
    assert (await storage.get("timeline", "t")).priority == 0


async def test_aging_lifts_a_low_priority_that_waited(storage: Storage) -> None:
    # Given an aging step of 100 ms: priority 2 that waited 250 ms ranks ahead of
    # priority 0 made available now; priority 2 that waited 150 ms behind it.
    topic = await given_priority_topic(storage, aging_ms=100)
    await given(
        storage,
        ranked(topic, "urgent-now", 0, NOW),
        ranked(topic, "low-waited-150", 2, NOW - 150),
        ranked(topic, "low-waited-250", 2, NOW - 250),
        ranked(topic, "one-waited-100", 1, NOW - 101),
    )
    assert ids(await lease(storage)) == [
        "low-waited-250",
        "one-waited-100",
        "urgent-now",
        "low-waited-150",
    ]


# -- promote ------------------------------------------------------------------


async def test_a_not_before_message_is_promoted_when_due_and_not_before(
    storage: Storage,
) -> None:
    topic = await given_priority_topic(storage)
    await given(storage, pending("later", 1, NOW + 500), ranked(topic, "now", 5))
    # Before its time it is neither promoted nor leased
    assert await storage.promote(P, None, NOW + 499, 100) == 0
    assert ids(await lease(storage, NOW + 499, limit=1)) == ["now"]
    assert (await storage.get(P, "later")).timestamp == NOW + 500
    # At its time it takes its rank, ahead of a less urgent message made available earlier
    await given(storage, ranked(topic, "waiting-5", 5, NOW))
    assert await storage.promote(P, None, NOW + 500, 100) == 1
    later = await storage.get(P, "later")
    assert (later.timestamp, later.version, later.priority, later.lease_owner) == (
        prio.rank(topic, 1, NOW + 500),
        2,
        1,
        None,
    )
    assert ids(await lease(storage, NOW + 500)) == ["later", "waiting-5"]
    # A ranked message is not promoted again
    assert await storage.promote(P, None, NOW + 600, 100) == 0


async def test_nack_with_delay_comes_back_at_its_priority_after_the_delay(
    storage: Storage,
) -> None:
    topic = await given_priority_topic(storage)
    await given(storage, ranked(topic, "m", 3, NOW - 1000))
    [taken] = (await lease(storage)).delivered
    [nacked] = await storage.nack(P, [("m", taken.version)], C1, NOW + 100, 0)
    assert nacked == Settled("m", taken.version + 1, NOW + 100)
    await given(storage, ranked(topic, "urgent", 2, NOW + 150), ranked(topic, "lax", 4, NOW - 5000))
    # Not before the delay
    assert await storage.promote(P, None, NOW + 99, 100) == 0
    assert ids(await lease(storage, NOW + 99, owner=C2, limit=1)) == ["urgent"]
    # After it, back at priority 3, ahead of priority 4
    assert await storage.promote(P, None, NOW + 200, 100) == 1
    m = await storage.get(P, "m")
    assert (m.timestamp, m.priority, m.version, m.lease_owner, m.deliveries) == (
        prio.rank(topic, 3, NOW + 100),
        3,
        taken.version + 2,
        None,
        1,
    )
    again = (await lease(storage, NOW + 200, owner=C2)).delivered
    assert [(d.id, d.priority, d.deliveries) for d in again] == [("m", 3, 2), ("lax", 4, 1)]


async def test_an_expired_lease_is_promoted_and_redelivered_at_its_priority(
    storage: Storage,
) -> None:
    topic = await given_priority_topic(storage)
    await given(storage, ranked(topic, "m", 2, NOW - 10))
    leases = await lease(storage)
    [taken] = leases.delivered
    until = leases.lease_until
    assert until == NOW + LEASE
    # While the lease runs, promote leaves it alone
    assert await storage.promote(P, None, until - 1, 100) == 0
    assert (await storage.get(P, "m")).lease_owner == C1
    # Once it has run out, the message is ranked again: unowned, version bumped
    await given(storage, ranked(topic, "lower", 3, NOW - 99_000))
    assert await storage.promote(P, None, until, 100) == 1
    m = await storage.get(P, "m")
    assert (m.timestamp, m.lease_owner, m.version, m.deliveries, m.priority) == (
        prio.rank(topic, 2, until),
        None,
        taken.version + 1,
        1,
        2,
    )
    # The former holder may no longer settle it
    [refused] = await storage.ack(P, [("m", taken.version)], C1, until)
    assert not isinstance(refused, Settled)
    again = (await lease(storage, until, owner=C2)).delivered
    assert [(d.id, d.priority, d.deliveries) for d in again] == [("m", 2, 2), ("lower", 3, 1)]


async def test_promote_takes_the_oldest_first_up_to_the_limit_in_the_given_buckets(
    storage: Storage,
) -> None:
    topic = await given_priority_topic(storage)
    await given(
        storage,
        pending("b0-new", 1, NOW - 1, bucket=0),
        pending("b0-old", 9, NOW - 30, bucket=0),
        pending("b0-mid", 0, NOW - 20, bucket=0),
        pending("b1-oldest", 0, NOW - 90, bucket=1),
        pending("b2-future", 0, NOW + 1, bucket=2),
        pending("b2-now", 0, NOW, bucket=2),
    )
    # Two of bucket 0: the two that became available first
    assert await storage.promote(P, [0], NOW, 2) == 2
    stamps = await timestamps(storage, ["b0-old", "b0-mid", "b0-new", "b1-oldest"])
    assert stamps == {
        "b0-old": prio.rank(topic, 9, NOW - 30),
        "b0-mid": prio.rank(topic, 0, NOW - 20),
        "b0-new": NOW - 1,
        "b1-oldest": NOW - 90,
    }
    # The rest of buckets 0 and 2, never the future one
    assert await storage.promote(P, [0, 2], NOW, 100) == 2
    stamps = await timestamps(storage, ["b0-new", "b2-now", "b2-future", "b1-oldest"])
    assert stamps == {
        "b0-new": prio.rank(topic, 1, NOW - 1),
        "b2-now": prio.rank(topic, 0, NOW),
        "b2-future": NOW + 1,
        "b1-oldest": NOW - 90,
    }
    # Every bucket
    assert await storage.promote(P, None, NOW + 1, 100) == 2
    assert ids(await lease(storage, NOW + 1)) == [
        "b1-oldest",
        "b0-mid",
        "b2-now",
        "b2-future",
        "b0-new",
        "b0-old",
    ]


async def test_promote_leaves_dead_messages_and_tombstones_alone(storage: Storage) -> None:
    topic = await given_priority_topic(storage, dedup_window_ms=60_000)
    # Given a message that died (expired) at its lease pass, and an acked one
    await given(
        storage,
        ranked(topic, "doomed", 4, NOW - 50, expires_at=NOW - 10),
        ranked(topic, "done", 5, NOW - 40),
    )
    leases = await lease(storage, NOW - 5)
    assert (ids(leases), leases.dead_lettered) == (["done"], 1)
    [done] = leases.delivered
    await storage.ack(P, [("done", done.version)], C1, NOW - 5)
    dead_before = await storage.get(P, "doomed")
    assert (dead_before.dead, dead_before.timestamp, dead_before.priority) == (True, NOW - 5, 4)
    # When everything due is promoted
    assert await storage.promote(P, None, NOW, 100) == 0
    # Then the dead message is unchanged and the acked id still taken
    assert await storage.get(P, "doomed") == dead_before
    [listed] = await storage.list_dead(P, "", 10)
    assert (listed.id, listed.priority) == ("doomed", 4)
    assert await storage.insert(P, [ranked(topic, "done", 5)]) == [DUPLICATE]
    # A redriven message comes back pending, and promote ranks it at its priority
    assert await storage.redrive(P, ["doomed"], NOW + 10) == 1
    assert await storage.promote(P, None, NOW + 10, 100) == 1
    doomed = await storage.get(P, "doomed")
    assert (doomed.dead, doomed.timestamp, doomed.priority) == (
        False,
        prio.rank(topic, 4, NOW + 10),
        4,
    )


async def test_a_message_out_of_deliveries_dies_from_its_rank(storage: Storage) -> None:
    topic = await given_priority_topic(storage)
    await given(storage, ranked(topic, "m", 1, max_deliveries=1 + 1))
    for owner, at in ((C1, NOW), (C2, NOW + LEASE)):
        if at > NOW:
            assert await storage.promote(P, None, at, 10) == 1
        assert ids(await lease(storage, at, owner=owner)) == ["m"]
    assert await storage.promote(P, None, NOW + 2 * LEASE, 10) == 1
    leases = await lease(storage, NOW + 2 * LEASE)
    assert (ids(leases), leases.dead_lettered) == ([], 1)
    m = await storage.get(P, "m")
    assert (m.dead, m.timestamp, m.priority) == (True, NOW + 2 * LEASE, 1)


async def test_promote_on_a_timeline_is_invalid_and_on_a_missing_topic_not_found(
    storage: Storage,
) -> None:
    await given_topic(storage, "timeline")
    await storage.insert("timeline", [NewMessage("t", NOW - 1, b"x", 0)])
    with pytest.raises(InvalidArgument):
        await storage.promote("timeline", None, NOW, 10)
    assert (await storage.get("timeline", "t")).timestamp == NOW - 1
    with pytest.raises(NotFound):
        await storage.promote("ghost", None, NOW, 10)
    await given_priority_topic(storage)
    with pytest.raises(InvalidArgument):
        await storage.promote(P, None, NOW, 0)


async def test_promote_of_an_empty_topic_or_bucket_moves_nothing(storage: Storage) -> None:
    await given_priority_topic(storage)
    assert await storage.promote(P, None, NOW, 10) == 0
    await given(storage, pending("m", 0, NOW, bucket=1))
    assert await storage.promote(P, [0, 2, 3], NOW, 10) == 0
    assert await storage.promote(P, [1], NOW, 10) == 1


# -- move, hand back ------------------------------------------------------------


async def test_move_changes_the_priority_with_the_timestamp(storage: Storage) -> None:
    topic = await given_priority_topic(storage)
    await given(
        storage,
        ranked(topic, "m", 8, NOW - 100),
        ranked(topic, "other", 4, NOW - 100),
        ranked(topic, "kept", 6, NOW - 100),
    )
    # To priority 0, available now: it jumps ahead
    at = prio.rank(topic, 0, NOW)
    assert await storage.move(P, "m", 1, at, NOW, priority=0) == Settled("m", 2, at)
    m = await storage.get(P, "m")
    assert (m.priority, m.timestamp, m.version) == (0, at, 2)
    # No priority: the priority stays, only the timestamp moves (here a not-before)
    assert await storage.move(P, "kept", 1, NOW + 500, NOW) == Settled("kept", 2, NOW + 500)
    kept = await storage.get(P, "kept")
    assert (kept.priority, kept.timestamp) == (6, NOW + 500)
    # With a payload and a new priority at once
    await storage.move(P, "other", 1, NOW + 300, NOW, payload=b"new", priority=9)
    other = await storage.get(P, "other")
    assert (other.priority, other.timestamp, other.payload) == (9, NOW + 300, b"new")
    assert ids(await lease(storage)) == ["m"]
    # Each is promoted at its new priority once its time has come
    assert await storage.promote(P, None, NOW + 500, 10) == 2
    assert (await storage.get(P, "kept")).timestamp == prio.rank(topic, 6, NOW + 500)
    assert (await storage.get(P, "other")).timestamp == prio.rank(topic, 9, NOW + 300)
    assert ids(await lease(storage, NOW + 500)) == ["kept", "other"]


async def test_a_handed_back_ranked_message_returns_to_its_rank(storage: Storage) -> None:
    topic = await given_priority_topic(storage)
    await given(storage, ranked(topic, "a", 2, NOW - 7), ranked(topic, "b", 5, NOW - 9))
    taken = (await lease(storage, horizon_ms=10)).delivered
    assert [d.timestamp for d in taken] == [
        prio.rank(topic, 2, NOW - 7),
        prio.rank(topic, 5, NOW - 9),
    ]
    outcomes = await storage.hand_back(P, [(d.id, d.version, d.timestamp) for d in taken], C1)
    assert outcomes == [
        Settled("a", 3, prio.rank(topic, 2, NOW - 7)),
        Settled("b", 3, prio.rank(topic, 5, NOW - 9)),
    ]
    a = await storage.get(P, "a")
    assert (a.timestamp, a.lease_owner, a.deliveries, a.priority) == (
        prio.rank(topic, 2, NOW - 7),
        None,
        0,
        2,
    )
    # Not promoted again (it is ranked), and leased again in order
    assert await storage.promote(P, None, NOW, 10) == 0
    again = (await lease(storage, owner=C2)).delivered
    assert [(d.id, d.deliveries, d.priority) for d in again] == [("a", 1, 2), ("b", 1, 5)]


# -- counts, census, next_due ---------------------------------------------------


async def test_counts_and_census_treat_ranked_messages_as_due(storage: Storage) -> None:
    topic = await given_priority_topic(storage, buckets=3)
    await given(
        storage,
        ranked(topic, "r1", 3, NOW - 5),
        ranked(topic, "r2", 0, NOW - 1, bucket=1),
        ranked(topic, "leased", 0, NOW - 9),
        ranked(topic, "doomed", 9, NOW - 9, bucket=2, expires_at=1),
        pending("future", 0, NOW + 1000, bucket=1),
        pending("come", 0, NOW - 100),
    )
    assert ids(await lease(storage, NOW - 8, limit=1)) == ["leased"]
    assert (await lease(storage, NOW - 8, buckets=[2])).dead_lettered == 1
    counts = await storage.counts(P, NOW)
    assert counts == Counts(waiting=1, due=3, leased=1, dead=1)
    oldest = prio.rank(topic, 0, NOW - 1)
    assert await storage.next_due(P, None) == oldest
    assert await storage.next_due(P, [1]) == oldest
    assert await storage.next_due(P, [0]) == prio.rank(topic, 3, NOW - 5)
    # and the census tells the head's priority, and the oldest not ranked ("come")
    assert await storage.census(NOW) == {P: TopicCensus(3, counts, oldest, Head(0, NOW - 100))}


@pytest.mark.parametrize("aging_ms", [0, 1_000])
async def test_the_census_tells_the_head_of_a_mixed_backlog(
    storage: Storage, aging_ms: int
) -> None:
    # Given a backlog of mixed priorities over several buckets (with aging, the
    # low priority that waited longest ranks first)
    topic = await given_priority_topic(storage, aging_ms=aging_ms)
    await given(
        storage,
        ranked(topic, "mid", 5, NOW - 5_000, bucket=1),
        ranked(topic, "top", 0, NOW - 10, bucket=2),
        ranked(topic, "low-old", 9, NOW - 60_000, bucket=3),
        ranked(topic, "top-new", 0, NOW - 1),
    )
    head_id = "low-old" if aging_ms else "top"
    # When the census is taken
    entry = (await storage.census(NOW))[P]
    # Then its head is the message a lease takes first: its priority inverts
    # the oldest rank to the time that message became available
    assert entry.oldest == (await storage.get(P, head_id)).timestamp
    assert entry.head is not None and entry.head.due is None  # nothing but ranks
    since = prio.available_at(topic, entry.head.priority, entry.oldest)
    assert since == {"top": NOW - 10, "low-old": NOW - 60_000}[head_id]
    assert ids(await lease(storage, limit=1)) == [head_id]
    # and once that one is leased (its timestamp no rank: the lease's end) the
    # next takes its place, and the lease counts as due once it has run out
    after = (await storage.census(NOW))[P]
    assert after.oldest == (await storage.get(P, "top-new" if aging_ms == 0 else "top")).timestamp
    assert after.head is not None and after.head.due is None
    lapsed = (await storage.census(NOW + LEASE))[P]
    assert lapsed.head is not None and lapsed.head.due == NOW + LEASE


async def test_the_census_of_a_priority_topic_with_no_rank_has_no_head(storage: Storage) -> None:
    # Given an empty priority topic, and one whose messages all wait or are leased
    topic = await given_priority_topic(storage)
    await given_topic(storage, "quiet")  # a timeline, for company
    assert (await storage.census(NOW))[P] == TopicCensus(4, Counts(), None)
    await given(storage, ranked(topic, "r", 2, NOW - 7), pending("later", 1, NOW + 50, bucket=1))
    assert ids(await lease(storage)) == ["r"]
    # Then the census has no head: the oldest is an ordinary timestamp
    entry = (await storage.census(NOW))[P]
    assert (entry.oldest, entry.head) == (NOW + 50, None)


async def test_the_census_follows_the_head_when_it_goes(storage: Storage) -> None:
    # Given ranked messages, the census taken once
    topic = await given_priority_topic(storage)
    await given(
        storage,
        ranked(topic, "first", 1, NOW - 30, bucket=1),
        ranked(topic, "second", 2, NOW - 90, bucket=1),
        pending("due", 4, NOW - 20, bucket=2),
        pending("later", 3, NOW + 50, bucket=3),
    )
    assert (await storage.census(NOW))[P].head == Head(1, NOW - 20)
    # When the head is cancelled
    await storage.cancel(P, "first", 1, NOW)
    # Then the next one is the head, read exactly
    entry = (await storage.census(NOW))[P]
    assert (entry.oldest, entry.head) == (prio.rank(topic, 2, NOW - 90), Head(2, NOW - 20))
    # and once the message still to promote is ranked, nothing unranked is due
    # (a not-before time still to come is no lag)
    assert await storage.promote(P, None, NOW, 10) == 1
    assert (await storage.census(NOW))[P].head == Head(2, None)
    assert (await storage.census(NOW + 60))[P].head == Head(2, NOW + 50)


async def test_next_due_returns_the_negative_rank(storage: Storage) -> None:
    topic = await given_priority_topic(storage)
    await given(storage, pending("p", 0, NOW + 5), ranked(topic, "r", 9, NOW))
    assert await storage.next_due(P, None) == prio.rank(topic, 9, NOW) < 0
    await storage.cancel(P, "r", 1, NOW)
    assert await storage.next_due(P, None) == NOW + 5


# -- exact ranks at the extremes -------------------------------------------------

EXTREMES = [
    # (aging_ms, priority): the largest rank magnitudes a double must hold exactly
    (0, 999),
    (0, 0),
    (1, 999),
    (1, 0),
]


@pytest.mark.parametrize(("aging_ms", "priority"), EXTREMES)
async def test_the_rank_round_trips_exactly_at_the_extremes(
    storage: Storage, aging_ms: int, priority: int
) -> None:
    now = 1_763_999_999_999
    topic = await given_priority_topic(
        storage, priorities=prio.MAX_PRIORITIES, aging_ms=aging_ms, created_at_ms=now - 3
    )
    # Stored at its rank by insert, and by promote (the backend computes it)
    await given(storage, ranked(topic, "inserted", priority, now - 1), pending("p", priority, now))
    await given(storage, ranked(topic, "next", priority, now + 7))
    assert await storage.promote(P, None, now, 10) == 1
    expected = {
        "inserted": prio.rank(topic, priority, now - 1),
        "p": prio.rank(topic, priority, now),
        "next": prio.rank(topic, priority, now + 7),
    }
    assert await timestamps(storage, list(expected)) == expected
    assert all(-prio.RANK_BASE < r < 0 for r in expected.values())
    assert await storage.next_due(P, None) == expected["inserted"]
    # Leased in exact order, each with its exact rank
    delivered = (await lease(storage, now)).delivered
    assert [(d.id, d.timestamp, d.priority) for d in delivered] == [
        (n, r, priority) for n, r in expected.items()
    ]
    assert [prio.available_at(topic, priority, d.timestamp) for d in delivered] == [
        now - 1,
        now,
        now + 7,
    ]


# -- races ----------------------------------------------------------------------


async def test_concurrent_promotes_rank_each_message_once(storage: Storage) -> None:
    # Given 300 messages become available over 8 buckets
    topic = await given_priority_topic(storage, buckets=8)
    await given(storage, *(pending(f"m{i:03d}", i % 10, NOW - i, bucket=i % 8) for i in range(300)))
    # When four dispatchers promote at once
    promoted = await asyncio.gather(*(storage.promote(P, None, NOW, 100) for _ in range(4)))
    # Then each message was ranked exactly once, at its own rank
    assert sum(promoted) == 300
    for i in range(300):
        m = await storage.get(P, f"m{i:03d}")
        assert (m.timestamp, m.version) == (prio.rank(topic, i % 10, NOW - i), 2)
    assert await storage.counts(P, NOW) == Counts(due=300)


async def test_two_instances_promote_and_lease_without_sharing_a_message(
    two_storages: tuple[Storage, Storage],
) -> None:
    first, second = two_storages
    await given_priority_topic(first, buckets=4)
    await given(first, *(pending(f"m{i:03d}", i % 3, NOW - i, bucket=i % 4) for i in range(200)))

    async def dispatch(storage: Storage, owner: str) -> list[str]:
        taken: list[str] = []
        while True:
            await storage.promote(P, None, NOW, 30)
            got = ids(await lease(storage, limit=30, owner=owner))
            if not got:
                return taken
            taken += got

    a, b = await asyncio.gather(dispatch(first, C1), dispatch(second, C2))
    assert len(a) + len(b) == len(set(a) | set(b)) == 200
    assert await first.counts(P, NOW) == Counts(leased=200)
    for i in range(200):
        m = await second.get(P, f"m{i:03d}")
        assert (m.deliveries, m.priority) == (1, i % 3)
        assert m.lease_owner == (C1 if m.id in a else C2)
