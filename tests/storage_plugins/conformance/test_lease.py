"""The lease pass: due only, in time order, per bucket, fates."""

from __future__ import annotations

import pytest

from dejaq.core.errors import (
    NotFound,
)
from dejaq.core.model import Counts
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    C1,
    C2,
    LEASE,
    NOW,
    T,
    given_messages,
    given_topic,
    ids,
    lease,
    msg,
)

# -- lease --------------------------------------------------------------------


async def test_lease_takes_only_due_messages(storage: Storage) -> None:
    # given one message in the past, one exactly now and one a millisecond later
    await given_topic(storage)
    await given_messages(storage, msg("past", NOW - 1), msg("now", NOW), msg("later", NOW + 1))
    # when leasing at NOW, then the later one is never delivered
    assert ids(await lease(storage)) == ["past", "now"]
    assert ids(await lease(storage)) == []
    assert ids(await lease(storage, NOW + 1)) == ["later"]


async def test_a_lease_looking_ahead_takes_what_is_due_by_its_bound(storage: Storage) -> None:
    # given messages due now, within the next 10 ms and just past them
    await given_topic(storage)
    await given_messages(
        storage, msg("now", NOW), msg("soon", NOW + 10, bucket=1), msg("later", NOW + 11)
    )
    # when leasing at NOW, looking 10 ms ahead
    leases = await lease(storage, horizon_ms=10)
    # then what is due by NOW + 10 is taken, with its own due time, in order
    assert [(d.id, d.timestamp) for d in leases.delivered] == [("now", NOW), ("soon", NOW + 10)]
    # and the lease runs lease_ms past the bound, never less from a delivery
    assert leases.lease_until == NOW + 10 + LEASE
    soon = await storage.get(T, "soon")
    assert (soon.timestamp, soon.lease_owner) == (NOW + 10 + LEASE, C1)
    assert ids(await lease(storage, NOW + 10)) == []
    assert ids(await lease(storage, NOW + 11)) == ["later"]


async def test_a_look_ahead_judges_expiry_at_the_delivery_time(storage: Storage) -> None:
    # given two messages due in 5 ms: one expires before then, one after
    await given_topic(storage)
    await given_messages(
        storage,
        msg("expires-first", NOW + 5, expires_at=NOW + 4),
        msg("expires-after", NOW + 5, bucket=1, expires_at=NOW + 6),
    )
    # when a pass at NOW looks 10 ms ahead (neither has expired yet at NOW)
    leases = await lease(storage, horizon_ms=10)
    # then the first is dead (at NOW, the pass's time), the second delivered
    assert (ids(leases), leases.dead_lettered) == (["expires-after"], 1)
    dead = await storage.get(T, "expires-first")
    assert (dead.dead, dead.timestamp) == (True, NOW)


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
    # (on a topic without a dedup window, so the id is free again)
    await given_topic(storage, buckets=4, dedup_window_ms=0)
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


async def test_a_pass_mixing_at_most_once_and_leased_messages_gives_each_its_payload(
    storage: Storage,
) -> None:
    # given messages across buckets, every other one at-most-once, one with no payload
    await given_topic(storage)
    sent = [
        msg(
            f"m{i}",
            NOW - 20 + i,
            bucket=i % 4,
            payload=b"" if i == 5 else b"p%d" % i,
            max_deliveries=1 if i % 2 else 0,
        )
        for i in range(12)
    ]
    await given_messages(storage, *sent)
    # when one pass takes them all
    leases = await lease(storage)
    # then each comes in due order with its own payload, whatever its fate
    assert [(d.id, d.payload) for d in leases.delivered] == [(m.id, m.payload) for m in sent]
    for m in sent[1::2]:
        with pytest.raises(NotFound):
            await storage.get(T, m.id)
    assert (await storage.get(T, "m4")).payload == b"p4"


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
