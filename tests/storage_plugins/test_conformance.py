"""The storage contract (storage_plugins/base.py), checked against every backend.

Time is a parameter of storage, never a clock: each story moves time by
passing a later ``now``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from dejaq.core.buckets import Buckets
from dejaq.core.errors import (
    AlreadyExists,
    DejaqError,
    Leased,
    NotFound,
    NotLeaseHolder,
    StaleVersion,
)
from dejaq.core.model import Counts, InsertStatus, Leases, NewMessage, Settled, Topic, TopicSettings
from dejaq.storage_plugins import Storage
from dejaq.storage_plugins.base import LeaseRequest

T = "timeline"
NOW = 1_000_000
LEASE = 1_000
C1, C2 = "consumer-1", "consumer-2"
ACCEPTED, DUPLICATE = InsertStatus.ACCEPTED, InsertStatus.DUPLICATE


def msg(
    id: str,
    ts: int = NOW,
    bucket: int = 0,
    payload: bytes | None = None,
    max_deliveries: int = 0,
    expires_at: int = 0,
) -> NewMessage:
    body = id.encode() if payload is None else payload
    return NewMessage(id, ts, body, bucket, max_deliveries, expires_at)


async def given_topic(storage: Storage, name: str = T, buckets: int = 4) -> Topic:
    topic = Topic(name, TopicSettings(buckets=buckets, lease_ms=LEASE), created_at_ms=42)
    await storage.create_topic(topic)
    return topic


async def given_messages(storage: Storage, *messages: NewMessage) -> None:
    assert await storage.insert(T, messages) == [ACCEPTED] * len(messages)


async def lease(
    storage: Storage,
    now: int = NOW,
    *,
    limit: int = 100,
    owner: str = C1,
    buckets: Buckets = None,
    max_deliveries: int = 0,
) -> Leases:
    request = LeaseRequest.of(T, buckets, now, limit, LEASE, owner, max_deliveries)
    return await storage.lease(request)


def ids(leases: Leases) -> list[str]:
    return [d.id for d in leases.delivered]


# -- topics -------------------------------------------------------------------


async def test_a_created_topic_reads_back_unchanged(storage: Storage) -> None:
    topic = await given_topic(storage)
    assert await storage.get_topic(T) == topic


async def test_a_duplicate_topic_is_refused_and_the_first_kept(storage: Storage) -> None:
    first = await given_topic(storage, buckets=4)
    with pytest.raises(AlreadyExists):
        await given_topic(storage, buckets=8)
    assert await storage.get_topic(T) == first


async def test_topics_are_listed_by_name(storage: Storage) -> None:
    for name in ("b", "c", "a"):
        await given_topic(storage, name)
    assert [t.name for t in await storage.list_topics()] == ["a", "b", "c"]


async def test_an_unknown_topic_is_not_found(storage: Storage) -> None:
    assert await storage.list_topics() == []
    with pytest.raises(NotFound):
        await storage.get_topic(T)
    with pytest.raises(NotFound):
        await storage.delete_topic(T)


async def test_deleting_a_topic_deletes_its_messages(storage: Storage) -> None:
    # given a topic with a live and a dead message
    await given_topic(storage)
    await given_messages(storage, msg("live"), msg("dying", expires_at=NOW))
    await lease(storage, limit=1)
    # when it is deleted and created again
    await storage.delete_topic(T)
    assert await storage.list_topics() == []
    await given_topic(storage)
    # then none of its messages remain
    assert await storage.counts(T, NOW) == Counts()
    with pytest.raises(NotFound):
        await storage.get(T, "live")
    assert await storage.insert(T, [msg("live"), msg("dying")]) == [ACCEPTED, ACCEPTED]


async def test_deleting_one_topic_leaves_the_others(storage: Storage) -> None:
    await given_topic(storage)
    await given_topic(storage, "other")
    await storage.insert("other", [msg("a")])
    await storage.delete_topic(T)
    assert (await storage.get("other", "a")).payload == b"a"


# -- insert -------------------------------------------------------------------


async def test_a_new_message_is_stored_at_version_1(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", ts=NOW + 5, bucket=3, max_deliveries=7, expires_at=9))
    m = await storage.get(T, "m")
    assert (m.id, m.timestamp, m.payload, m.bucket) == ("m", NOW + 5, b"m", 3)
    assert (m.version, m.deliveries, m.lease_owner, m.dead) == (1, 0, None, False)
    assert (m.max_deliveries, m.expires_at) == (7, 9)


async def test_a_duplicate_id_is_reported_and_left_untouched(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", ts=NOW, payload=b"first"))
    statuses = await storage.insert(T, [msg("m", ts=NOW + 9, payload=b"second"), msg("n")])
    assert statuses == [DUPLICATE, ACCEPTED]
    m = await storage.get(T, "m")
    assert (m.timestamp, m.payload, m.version) == (NOW, b"first", 1)


async def test_within_one_batch_the_first_of_a_repeated_id_wins(storage: Storage) -> None:
    await given_topic(storage)
    statuses = await storage.insert(T, [msg("m", payload=b"1"), msg("m", payload=b"2")])
    assert statuses == [ACCEPTED, DUPLICATE]
    assert (await storage.get(T, "m")).payload == b"1"


async def test_a_dead_message_id_is_still_a_duplicate(storage: Storage) -> None:
    # given a message that died of expiry
    await given_topic(storage)
    await given_messages(storage, msg("m", expires_at=NOW))
    assert (await lease(storage)).dead_lettered == 1
    # when it is produced again, then it is a duplicate and stays dead
    assert await storage.insert(T, [msg("m")]) == [DUPLICATE]
    assert (await storage.get(T, "m")).dead


async def test_an_empty_insert_stores_nothing(storage: Storage) -> None:
    await given_topic(storage)
    assert await storage.insert(T, []) == []
    assert await storage.counts(T, NOW) == Counts()


@pytest.mark.parametrize(
    "payload",
    [b"", b"\x00", b"\x00bin\x00ary\xff\x00", bytes(range(256)) * 4096],
    ids=["empty", "nul", "binary", "1MiB"],
)
async def test_a_payload_comes_back_byte_for_byte(storage: Storage, payload: bytes) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m", payload=payload))
    assert (await storage.get(T, "m")).payload == payload
    [delivery] = (await lease(storage)).delivered
    assert delivery.payload == payload


# -- unknown topic ------------------------------------------------------------

CALLS: dict[str, Callable[[Storage], Awaitable[object]]] = {
    "insert": lambda s: s.insert(T, [msg("m")]),
    "lease": lambda s: s.lease(LeaseRequest.of(T, None, NOW, 1, LEASE, C1, 0)),
    "get": lambda s: s.get(T, "m"),
    "next_due": lambda s: s.next_due(T, None),
    "counts": lambda s: s.counts(T, NOW),
    "move": lambda s: s.move(T, "m", 1, NOW, NOW),
    "cancel": lambda s: s.cancel(T, "m", 1, NOW),
    "ack": lambda s: s.ack(T, [("m", 1)], C1, NOW),
    "list_dead": lambda s: s.list_dead(T, "", 10),
    "redrive": lambda s: s.redrive(T, None, NOW),
    "purge_dead": lambda s: s.purge_dead(T, NOW),
}


@pytest.mark.parametrize("call", list(CALLS))
async def test_a_call_on_an_unknown_topic_is_not_found(storage: Storage, call: str) -> None:
    with pytest.raises(NotFound):
        await CALLS[call](storage)


async def test_an_unknown_message_is_not_found(storage: Storage) -> None:
    await given_topic(storage)
    with pytest.raises(NotFound):
        await storage.get(T, "nobody")


# -- lease --------------------------------------------------------------------


async def test_lease_takes_only_due_messages(storage: Storage) -> None:
    # given one message in the past, one exactly now and one a millisecond later
    await given_topic(storage)
    await given_messages(storage, msg("past", NOW - 1), msg("now", NOW), msg("later", NOW + 1))
    # when leasing at NOW, then the later one is never delivered
    assert ids(await lease(storage)) == ["past", "now"]
    assert ids(await lease(storage)) == []
    assert ids(await lease(storage, NOW + 1)) == ["later"]


async def test_lease_goes_in_timestamp_order_across_buckets(storage: Storage) -> None:
    await given_topic(storage, buckets=4)
    await given_messages(
        storage,
        msg("d", NOW - 1, bucket=0),
        msg("a", NOW - 40, bucket=3),
        msg("c", NOW - 20, bucket=1),
        msg("b", NOW - 30, bucket=2),
        msg("e", NOW, bucket=3),
    )
    leases = await lease(storage)
    assert ids(leases) == ["a", "b", "c", "d", "e"]
    assert [d.timestamp for d in leases.delivered] == [NOW - 40, NOW - 30, NOW - 20, NOW - 1, NOW]


async def test_lease_takes_at_most_limit_earliest_first(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, *(msg(f"m{i}", NOW - 10 + i, bucket=i % 4) for i in range(5)))
    assert ids(await lease(storage, limit=2)) == ["m0", "m1"]
    assert ids(await lease(storage, limit=2)) == ["m2", "m3"]
    assert ids(await lease(storage, limit=2)) == ["m4"]


async def test_lease_takes_only_the_given_buckets(storage: Storage) -> None:
    await given_topic(storage, buckets=4)
    await given_messages(storage, *(msg(f"b{b}", NOW - b, bucket=b) for b in range(4)))
    assert ids(await lease(storage, buckets=[])) == []
    assert ids(await lease(storage, buckets={1, 3})) == ["b3", "b1"]
    assert ids(await lease(storage, buckets=[3])) == []
    assert ids(await lease(storage)) == ["b2", "b0"]


async def test_a_reproduced_id_is_due_at_its_new_time_only(storage: Storage) -> None:
    # given a message cancelled before it was due, then produced again for later
    await given_topic(storage, buckets=4)
    await given_messages(storage, msg("m", NOW, bucket=1))
    await storage.cancel(T, "m", 1, NOW - 1)
    await given_messages(storage, msg("m", NOW + 100, bucket=1))
    # then nothing of the first life is due
    assert await storage.next_due(T, None) == NOW + 100
    assert ids(await lease(storage, NOW)) == []
    assert ids(await lease(storage, NOW + 100)) == ["m"]


async def test_a_repeated_or_unknown_bucket_changes_nothing(storage: Storage) -> None:
    # given a due and a later message in one bucket
    await given_topic(storage, buckets=4)
    await given_messages(storage, msg("due", NOW, bucket=1), msg("later", NOW + 1, bucket=1))
    # when the bucket is named twice, along with buckets the topic does not have
    leases = await lease(storage, buckets=[1, 1, 7, -1])
    # then the due message is delivered once and the later one not at all
    assert ids(leases) == ["due"]
    assert await storage.next_due(T, [1, 1, 7]) == NOW + 1
    assert ids(await lease(storage, buckets=[7])) == []


async def test_lease_marks_the_message_leased_until_now_plus_lease(storage: Storage) -> None:
    # given a due message
    await given_topic(storage)
    await given_messages(storage, msg("m", NOW - 7, payload=b"body"))
    # when it is leased
    leases = await lease(storage, owner=C1)
    # then the delivery carries its due time, the new version and the delivery count
    assert leases.lease_until == NOW + LEASE
    assert leases.dead_lettered == 0
    [d] = leases.delivered
    assert (d.id, d.timestamp, d.payload, d.version, d.deliveries) == ("m", NOW - 7, b"body", 2, 1)
    # and the stored message is moved to the lease expiry, owned by the consumer
    m = await storage.get(T, "m")
    assert (m.timestamp, m.lease_owner, m.version, m.deliveries) == (NOW + LEASE, C1, 2, 1)
    assert m.payload == b"body"


async def test_a_leased_message_is_redelivered_only_after_its_lease(storage: Storage) -> None:
    # given a message leased by one consumer that neither acks nor extends
    await given_topic(storage)
    await given_messages(storage, msg("m"))
    await lease(storage, owner=C1)
    # then it is not leased again while the lease lasts
    assert ids(await lease(storage, NOW + LEASE - 1, owner=C2)) == []
    # and is redelivered once it expires
    leases = await lease(storage, NOW + LEASE, owner=C2)
    [d] = leases.delivered
    assert (d.id, d.timestamp, d.deliveries, d.version) == ("m", NOW + LEASE, 2, 3)
    assert (await storage.get(T, "m")).lease_owner == C2


async def test_at_most_once_deletes_the_message_when_delivered(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("m"))
    leases = await lease(storage, max_deliveries=1)
    assert ids(leases) == ["m"]
    assert leases.delivered[0].deliveries == 1
    with pytest.raises(NotFound):
        await storage.get(T, "m")
    assert await storage.counts(T, NOW + LEASE) == Counts()


async def test_after_max_deliveries_the_next_lease_pass_dead_letters(storage: Storage) -> None:
    # given a message delivered three times, the maximum, and never settled
    await given_topic(storage)
    await given_messages(storage, msg("m"))
    now = NOW
    for attempt in (1, 2, 3):
        [d] = (await lease(storage, now, max_deliveries=3)).delivered
        assert d.deliveries == attempt
        now += LEASE
    version = (await storage.get(T, "m")).version
    # when its last lease expires and a lease pass runs
    leases = await lease(storage, now, max_deliveries=3)
    # then it is not delivered but moved to the dead timeline at that time
    assert (ids(leases), leases.dead_lettered) == ([], 1)
    m = await storage.get(T, "m")
    assert (m.dead, m.timestamp, m.lease_owner, m.version) == (True, now, None, version + 1)
    assert await storage.counts(T, now) == Counts(dead=1)


async def test_a_message_max_deliveries_overrides_the_topic(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(storage, msg("once", max_deliveries=1), msg("twice", max_deliveries=2))
    # the pass says "unlimited", yet "once" is at-most-once and "twice" dies after two
    assert ids(await lease(storage, max_deliveries=0)) == ["once", "twice"]
    with pytest.raises(NotFound):
        await storage.get(T, "once")
    assert ids(await lease(storage, NOW + LEASE, max_deliveries=0)) == ["twice"]
    assert (await lease(storage, NOW + 2 * LEASE, max_deliveries=0)).dead_lettered == 1


async def test_a_message_past_its_expiry_dies_instead_of_being_delivered(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(
        storage,
        msg("expired", NOW - 2, expires_at=NOW - 1),
        msg("expires-now", NOW - 1, expires_at=NOW),
        msg("fresh", NOW, expires_at=NOW + 1),
    )
    leases = await lease(storage)
    assert (ids(leases), leases.dead_lettered) == (["fresh"], 2)
    expired = await storage.get(T, "expired")
    assert (expired.dead, expired.timestamp) == (True, NOW)


async def test_dead_letters_do_not_use_up_the_lease_limit(storage: Storage) -> None:
    await given_topic(storage)
    await given_messages(
        storage, msg("x1", NOW - 3, expires_at=1), msg("x2", NOW - 2, expires_at=1), msg("ok")
    )
    leases = await lease(storage, limit=1)
    assert (ids(leases), leases.dead_lettered) == (["ok"], 2)


# -- ack / extend / nack ------------------------------------------------------


async def given_leased(storage: Storage, *names: str, owner: str = C1) -> dict[str, int]:
    """Messages due at NOW, leased by ``owner``; their versions by id."""
    await given_topic(storage)
    await given_messages(storage, *(msg(n) for n in names))
    leases = await lease(storage, owner=owner)
    return {d.id: d.version for d in leases.delivered}


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
    await given_topic(storage)
    await given_messages(
        storage,
        msg("dead", NOW - 9, expires_at=1),
        msg("leased", NOW - 8),
        msg("expired-lease", NOW - 7),
        msg("due", NOW + LEASE // 2),
        msg("waiting", NOW + 10 * LEASE),
    )
    await lease(storage, NOW - 7, limit=2, owner=C1)  # dead-letters "dead", leases two
    await storage.extend(T, [("leased", 2)], C1, NOW + 2 * LEASE)
    assert await storage.counts(T, NOW + LEASE) == Counts(waiting=1, due=2, leased=1, dead=1)


# -- the dead timeline --------------------------------------------------------


async def given_dead(storage: Storage, *names: str, died_at: int = NOW) -> None:
    await given_topic(storage)
    await given_messages(storage, *(msg(n, died_at, expires_at=1) for n in names))
    assert (await lease(storage, died_at)).dead_lettered == len(names)


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


# -- concurrency --------------------------------------------------------------


async def test_concurrent_leases_never_share_a_message(storage: Storage) -> None:
    # given 1,000 due messages over 16 buckets
    await given_topic(storage, buckets=16)
    await given_messages(storage, *(msg(f"m{i:04d}", NOW - i, bucket=i % 16) for i in range(1000)))
    # when eight consumers lease at once
    results = await asyncio.gather(*(lease(storage, limit=200, owner=f"c{k}") for k in range(8)))
    # then every message went to exactly one of them
    taken = [id for leases in results for id in ids(leases)]
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
    taken = [id for leases in results for id in ids(leases)]
    assert len(taken) == len(set(taken)) == 1000
    assert await two.counts(T, NOW) == Counts(leased=1000)
