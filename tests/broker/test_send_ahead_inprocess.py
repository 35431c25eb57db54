"""Sending ahead, in-process on a manual clock: a consumer that holds deliveries
until due itself (``Hello.hold_ms``) is sent them up to ``--send-ahead-ms``
early, each frame stamped with the broker's clock; one that does not is sent
each at its millisecond, as before."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.context import BrokerContext
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import ManualClock, Session, produce_at, running_broker, settle_down

pytestmark = pytest.mark.timeout(30)
T = "jobs"
SEND_AHEAD = 25


async def _topic(broker: BrokerContext, **settings: object) -> None:
    pb_settings = settings_to_pb(TopicSettings(buckets=8, lease_ms=1_000, **settings))  # type: ignore[arg-type]
    await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=pb_settings))


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    # memory's own look-ahead: 0, so only sending ahead takes anything early
    async with running_broker(clock, lookahead_ms=0, send_ahead_ms=SEND_AHEAD) as broker:
        yield broker


async def test_a_holding_consumer_gets_a_message_up_to_send_ahead_early_never_sooner(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer that holds up to 50 ms, on a broker that sends 25 ms ahead
    await _topic(broker)
    session = Session(broker, T, "c1", credits=10, hold_ms=50)
    await settle_down()
    t0 = clock.now
    # When one message is due in 20 ms and another in 40 ms
    soon, later = await produce_at(broker, T, [t0 + 20, t0 + 40])
    await settle_down()
    # Then the first goes at once, stamped with the broker's clock
    assert session.ids == [soon]
    assert session.sent_at == [t0]
    # and the second no sooner than 25 ms before it is due
    clock.advance(14)
    await settle_down()
    assert session.ids == [soon]
    clock.advance(1)
    await settle_down()
    assert session.ids == [soon, later]
    assert session.sent_at[1] == t0 + 15
    await session.close()


async def test_a_consumer_that_holds_less_than_send_ahead_is_sent_that_much_early(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer that holds only 10 ms
    await _topic(broker)
    session = Session(broker, T, "c1", credits=10, hold_ms=10)
    await settle_down()
    t0 = clock.now
    (mid,) = await produce_at(broker, T, [t0 + 20])
    await settle_down()
    # Then a message due in 20 ms reaches it 10 ms before, not sooner
    clock.advance(9)
    await settle_down()
    assert session.ids == []
    clock.advance(1)
    await settle_down()
    assert session.ids == [mid]
    assert session.sent_at == [t0 + 10]
    await session.close()


async def test_a_consumer_that_does_not_hold_is_sent_each_message_at_its_millisecond(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given two consumers of one topic: one holds (with credit for 5, which it
    # never gives back), one does not
    await _topic(broker)
    holder = Session(broker, T, "holder", credits=5, hold_ms=50)
    plain = Session(broker, T, "plain", credits=1_000)
    await settle_down()
    t0 = clock.now
    # When messages fall due over the next 60 ms, a millisecond at a time
    await produce_at(broker, T, [t0 + k for k in range(1, 61)])
    for _ in range(60):
        clock.advance(1)
        await settle_down()
    # Then every one was delivered once: 5 to the holder, the rest to the other
    assert (len(holder.deliveries), len(plain.deliveries)) == (5, 55)
    assert all(s >= d.timestamp for d, s in zip(plain.deliveries, plain.sent_at, strict=True))
    # the holder up to 25 ms before, never sooner
    assert any(s < d.timestamp for d, s in zip(holder.deliveries, holder.sent_at, strict=True))
    assert all(
        d.timestamp - s <= SEND_AHEAD
        for d, s in zip(holder.deliveries, holder.sent_at, strict=True)
    )
    await holder.close()
    await plain.close()


async def test_a_priority_topic_sends_nothing_ahead(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a priority topic and a consumer that holds
    await _topic(broker, kind="priority", priorities=10)
    session = Session(broker, T, "c1", credits=10, hold_ms=50)
    await settle_down()
    t0 = clock.now
    # When a message may not be delivered before 20 ms from now
    (mid,) = await produce_at(broker, T, [t0 + 20])
    await settle_down()
    clock.advance(19)
    await settle_down()
    # Then it is not sent ahead: what leaves must be the most urgent when it leaves
    assert session.ids == []
    clock.advance(1)
    await settle_down()
    assert session.ids == [mid]
    assert session.sent_at == [t0 + 20]
    await session.close()
