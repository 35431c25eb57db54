"""Nack, extend and dead-lettering, in-process on a manual clock: each
redelivery is judged at its exact millisecond."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.context import BrokerContext
from dejaq.core.model import LeasedMessage, State, TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import ManualClock, Session, produce_at, running_broker, settle_down

pytestmark = pytest.mark.timeout(30)
T = "jobs"
LEASE_MS = 500


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    async with running_broker(clock, lookahead_ms=0, send_ahead_ms=0) as broker:
        yield broker


async def given_topic(broker: BrokerContext, **settings: int) -> None:
    s = settings_to_pb(TopicSettings(buckets=4, lease_ms=LEASE_MS, **settings))
    await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=s))


async def settle(
    session: Session, kind: pb.Settle.Kind.ValueType, d: LeasedMessage, ms: int
) -> None:
    """Settle ``d`` and wait for the broker's answer."""
    answered = len(session.settled)
    frame = pb.Settle(kind=kind, ids=[d.id], versions=[d.version], ms=ms, token=answered + 1)
    session.send(pb.ConsumeRequest(settle=frame))
    await settle_down()
    assert len(session.settled) == answered + 1
    assert list(session.settled[-1].rejections) == []


async def test_nack_redelivers_after_the_delay_not_before(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a delivered message
    await given_topic(broker)
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    (mid,) = await produce_at(broker, T, [clock.now])
    await settle_down()
    (first,) = session.deliveries
    # When it is nacked with a 500 ms delay
    nacked_at = clock.now
    await settle(session, pb.Settle.NACK, first, 500)
    # Then it is not back 1 ms before the delay is over
    clock.advance(499)
    await settle_down()
    assert session.ids == [mid]
    # and it is back at its millisecond, as its second delivery
    clock.advance(1)
    await settle_down()
    assert session.ids == [mid, mid]
    again = session.deliveries[1]
    assert (again.deliveries, again.timestamp) == (2, nacked_at + 500)
    await session.close()


async def test_extend_keeps_the_message_past_its_original_lease(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a message delivered under a 500 ms lease
    await given_topic(broker)
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    (mid,) = await produce_at(broker, T, [clock.now])
    await settle_down()
    (d,) = session.deliveries
    # When the consumer extends it to 5 s
    await settle(session, pb.Settle.EXTEND, d, 5_000)
    extended_at = clock.now
    # Then it stays leased past the first 500 ms, up to the last ms of the extension
    clock.advance(4_999)
    await settle_down()
    stored = await broker.storage.get(T, mid)
    assert stored.state(clock.now) == State.LEASED
    assert stored.timestamp == extended_at + 5_000
    assert session.ids == [mid]
    # and the holder can still ack it
    assert list(session.settled[-1].versions) == [stored.version]
    await settle(session, pb.Settle.ACK, d._replace(version=stored.version), 0)
    await session.close()


async def test_a_message_nacked_past_max_deliveries_goes_dead(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a topic with max_deliveries=2 and a consumer that nacks everything
    await given_topic(broker, max_deliveries=2)
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    (mid,) = await produce_at(broker, T, [clock.now])
    await settle_down()
    await settle(session, pb.Settle.NACK, session.deliveries[0], 0)
    await settle_down()
    assert [d.deliveries for d in session.deliveries] == [1, 2]
    # When it nacks the last allowed delivery
    await settle(session, pb.Settle.NACK, session.deliveries[1], 0)
    # Then the message is dead at once, and not delivered again
    assert [m.id for m in await broker.storage.list_dead(T, "", 10)] == [mid]
    clock.advance(10 * LEASE_MS)
    await settle_down()
    assert session.ids == [mid, mid]
    await session.close()
