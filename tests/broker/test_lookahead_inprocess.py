"""The look-ahead window in-process, on a manual clock: messages leased a few ms
ahead are held by the broker and leave exactly at their millisecond."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.produce import produce
from dejaq.broker.context import BrokerContext
from dejaq.core import headers
from dejaq.core.errors import Leased
from dejaq.core.model import TopicSettings
from dejaq.core.wire.batches import encode_messages
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import ManualClock, Session, produce_at, running_broker, settle_down

pytestmark = pytest.mark.timeout(30)
T = "jobs"
LOOKAHEAD = 20
LEASE = 1_000


@contextlib.asynccontextmanager
async def _broker(clock: ManualClock, lookahead_ms: int) -> AsyncIterator[BrokerContext]:
    async with running_broker(clock, lookahead_ms) as broker:
        settings = settings_to_pb(TopicSettings(buckets=8, lease_ms=LEASE))
        await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
        yield broker


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    async with _broker(clock, LOOKAHEAD) as broker:
        yield broker


async def _leased(broker: BrokerContext, clock: ManualClock) -> int:
    return (await broker.storage.counts(T, clock.now)).leased


async def test_a_message_taken_ahead_leaves_at_its_millisecond_not_before(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer and a message due 15 ms from now, inside the look-ahead
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    (mid,) = await produce_at(broker, T, [clock.now + 15])
    await settle_down()
    # Then it is leased at once, yet not delivered while the clock is before it
    assert await _leased(broker, clock) == 1
    clock.advance(14)
    await settle_down()
    assert session.ids == []
    # and it leaves at its millisecond
    clock.advance(1)
    await settle_down()
    assert session.ids == [mid]
    (d,) = session.deliveries
    assert (d.timestamp, d.deliveries) == (clock.now, 1)
    await session.close()


async def test_a_held_message_counts_against_credit(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer with credit for 2 and three messages due within the look-ahead
    session = Session(broker, T, "c1", credits=2)
    await settle_down()
    ids = await produce_at(broker, T, [clock.now + 5, clock.now + 6, clock.now + 7])
    await settle_down()
    # Then only two are taken, and only two ever leave until credit comes back
    assert await _leased(broker, clock) == 2
    clock.advance(10)
    await settle_down()
    assert session.ids == ids[:2]
    session.ack(session.deliveries, credits=2)
    await settle_down()
    assert session.ids == ids
    await session.close()


async def test_messages_beyond_the_look_ahead_wait_in_storage(
    broker: BrokerContext, clock: ManualClock
) -> None:
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    (mid,) = await produce_at(broker, T, [clock.now + LOOKAHEAD + 30])
    await settle_down()
    # Not leased while it is further off than the look-ahead, so still movable
    assert await _leased(broker, clock) == 0
    clock.advance(30)
    await settle_down()
    # then taken ahead, and from then on a move is refused as under a lease
    assert await _leased(broker, clock) == 1
    with pytest.raises(Leased):
        await broker.storage.move(T, mid, 2, clock.now + 60_000, clock.now)
    clock.advance(LOOKAHEAD)
    await settle_down()
    assert session.ids == [mid]
    await session.close()


@pytest.mark.parametrize("leaving", ["goodbye", "vanished"])
async def test_held_messages_of_a_leaving_consumer_go_back_at_their_own_time(
    broker: BrokerContext, clock: ManualClock, leaving: str
) -> None:
    # Given messages held for a consumer that then leaves (says goodbye, or its
    # stream breaks), one of them at-most-once
    first = Session(broker, T, "c1", credits=10)
    await settle_down()
    ids = await produce_at(broker, T, [clock.now + 10, clock.now + 12])
    once = "once"
    batch = encode_messages([clock.now + 11], [b"x"], [once], max_deliveries=[1])
    await produce(broker, pb.ProduceRequest(topic=T, batch=batch))
    await settle_down()
    assert await _leased(broker, clock) == 2  # and "once", deleted as it was taken
    await (first.close() if leaving == "goodbye" else first.vanish())
    await settle_down()
    assert first.ids == []
    # Then they are back on the timeline, unleased, none lost
    counts = await broker.storage.counts(T, clock.now)
    assert (counts.leased, counts.waiting) == (0, 3)
    # and another consumer gets each at its own millisecond, never before,
    # as a first delivery
    second = Session(broker, T, "c2", credits=10)
    await settle_down()
    clock.advance(9)
    await settle_down()
    assert second.ids == []
    clock.advance(1)
    await settle_down()
    assert second.ids == ids[:1]
    clock.advance(2)
    await settle_down()
    assert second.ids == [ids[0], once, ids[1]]
    assert [d.deliveries for d in second.deliveries] == [1, 1, 1]
    await second.close()


async def test_without_look_ahead_nothing_is_leased_before_it_is_due(
    clock: ManualClock,
) -> None:
    async with _broker(clock, 0) as broker:
        session = Session(broker, T, "c1", credits=10)
        await settle_down()
        (mid,) = await produce_at(broker, T, [clock.now + 5])
        await settle_down()
        clock.advance(4)
        await settle_down()
        assert await _leased(broker, clock) == 0
        clock.advance(1)
        await settle_down()
        assert session.ids == [mid]
        await session.close()


async def test_under_steady_load_a_pass_runs_every_half_look_ahead(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a message due every millisecond for 200 ms
    leases = 0

    def count(operation: str, seconds: float, ok: bool) -> None:
        nonlocal leases
        leases += operation == "lease"

    broker.storage.on_operation = count
    session = Session(broker, T, "c1", credits=1000)
    await settle_down()
    start = clock.now
    await produce_at(broker, T, [start + 1 + i for i in range(200)])
    await settle_down()
    # When the clock runs through them a millisecond at a time
    for _ in range(200):
        clock.advance(1)
        await settle_down()
    # Then each arrived at its millisecond, from about one pass per 10 ms
    assert [d.timestamp for d in session.deliveries] == [start + 1 + i for i in range(200)]
    assert leases <= 200 // (LOOKAHEAD // 2) + 3
    await session.close()


async def test_an_at_most_once_message_handed_back_keeps_its_key_and_headers(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given an at-most-once message with a key and headers, held for a consumer
    first = Session(broker, T, "c1", credits=10)
    await settle_down()
    heads = headers.encode({"schema": "v2"})
    batch = encode_messages(
        [clock.now + 10], [b"x"], ["once"], max_deliveries=[1], keys=["tenant-7"], headers=[heads]
    )
    await produce(broker, pb.ProduceRequest(topic=T, batch=batch))
    await settle_down()
    # When the consumer leaves, it is stored again (it was deleted as it was taken)
    await first.close()
    await settle_down()
    # Then with its key and headers
    stored = await broker.storage.get(T, "once")
    assert (stored.key, stored.headers) == ("tenant-7", heads)
