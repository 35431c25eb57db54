"""Pausing a topic in-process, on a manual clock: nothing is leased or sent while
it is paused (not even what the look-ahead window held), leases already out may
be settled, and a resume delivers the backlog in due order, never early, its
lateness told apart from the broker's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.context import BrokerContext
from dejaq.broker.observability import gauges
from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import ManualClock, Session, produce_at, running_broker, settle_down

pytestmark = pytest.mark.timeout(60)
T = "reminders"


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    async with running_broker(clock, lookahead_ms=20) as broker:
        settings = settings_to_pb(TopicSettings(buckets=8, lease_ms=60_000))
        await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
        yield broker


async def _set_paused(broker: BrokerContext, paused: bool) -> pb.Topic:
    return await control.update_topic(broker, pb.UpdateTopicRequest(name=T, paused=paused))


async def _run(clock: ManualClock, ms: int) -> None:
    """Move the clock ``ms`` one millisecond at a time, letting every task run."""
    for _ in range(ms):
        clock.advance(1)
        await settle_down()


def _paused_gauge(broker: BrokerContext) -> float | None:
    labels = {"topic": T, "kind": "timeline"}
    return broker.metrics.registry.get_sample_value("dejaq_topic_paused", labels)


def _count(histogram: object) -> int:
    return int(sum(s.counts.sum() for s in histogram._series.values()))  # type: ignore[attr-defined]


def _sum_s(histogram: object) -> float:
    return float(sum(s.sum_s for s in histogram._series.values()))  # type: ignore[attr-defined]


async def test_nothing_is_delivered_while_paused_and_the_backlog_follows_in_due_order(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer with room, and a paused topic
    session = Session(broker, T, "c1", credits=1_000)
    await settle_down()
    await _set_paused(broker, True)
    # When messages fall due while it is paused (produced in no particular order)
    stamps = [clock.now + ms for ms in (40, 5, 90, 20, 60, 5)]
    ids = await produce_at(broker, T, stamps)
    await _run(clock, 200)
    # Then nothing was leased or sent
    assert session.deliveries == []
    counts = await broker.storage.counts(T, clock.now)
    assert (counts.due, counts.leased) == (len(stamps), 0)
    # When it is resumed
    await _set_paused(broker, False)
    await _run(clock, 2)
    # Then the whole backlog went out, in due order, none before its time
    assert sorted(session.ids) == sorted(ids)
    assert [d.timestamp for d in session.deliveries] == sorted(stamps)
    assert all(d.timestamp <= at for d, at in zip(session.deliveries, session.sent_at, strict=True))
    await session.close()


async def test_what_the_look_ahead_window_held_is_handed_back_not_sent(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a message leased ahead of its time (the broker looks 20 ms ahead),
    # held in the window for its consumer
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    [mid] = await produce_at(broker, T, [clock.now + 10])
    await settle_down()
    assert (await broker.storage.get(T, mid)).lease_owner == "c1"
    # When the topic is paused and its millisecond comes and goes
    await _set_paused(broker, True)
    await _run(clock, 50)
    # Then it was not sent, and it is back on the timeline, leased to nobody
    assert session.deliveries == []
    assert (await broker.storage.get(T, mid)).lease_owner is None
    # And after a resume it goes out (the consumer's credit is whole again)
    await _set_paused(broker, False)
    await _run(clock, 2)
    assert session.ids == [mid]
    await session.close()


async def test_a_lease_taken_before_the_pause_may_be_settled_while_paused(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a delivery made before the pause
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    [mid] = await produce_at(broker, T, [clock.now + 1])
    await _run(clock, 2)
    [delivery] = session.deliveries
    # When the topic is paused and the consumer acks it
    await _set_paused(broker, True)
    session.ack([delivery])
    await _run(clock, 2)
    # Then the ack took: the message is gone
    assert [r.token for r in session.settled] == [1]
    assert list(session.settled[-1].rejections) == []
    with pytest.raises(NotFound):
        await broker.storage.get(T, mid)
    await session.close()


async def test_lateness_a_pause_caused_is_counted_apart_from_the_brokers(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a paused topic with a message due 1 s into the pause
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    await _set_paused(broker, True)
    await produce_at(broker, T, [clock.now + 1_000])
    # When the pause lasts 5 s, then the topic is resumed
    await _run(clock, 1)
    clock.advance(4_999)
    await settle_down()
    await _set_paused(broker, False)
    await _run(clock, 2)
    # Then the delivery is 4 s late by the pause and on time by the broker
    assert len(session.deliveries) == 1
    metrics = broker.metrics
    assert (_count(metrics.lateness), _count(metrics.paused_lateness)) == (1, 1)
    assert _sum_s(metrics.lateness) <= 0.002
    assert _sum_s(metrics.paused_lateness) == pytest.approx(4.0, abs=0.001)
    await session.close()


async def test_the_paused_gauge_and_describe_show_the_state(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # When the topic is paused
    answer = await _set_paused(broker, True)
    # Then the answer, describe and the gauge all say so, with since when
    assert answer.settings.paused and answer.settings.paused_at_ms == clock.now
    described = await control.describe_topic(broker, pb.DescribeTopicRequest(name=T))
    assert described.topic.settings.paused
    await gauges.refresh(broker)
    assert _paused_gauge(broker) == 1
    # And once resumed, they say it runs, the pause's start and end kept
    clock.advance(30)
    answer = await _set_paused(broker, False)
    assert not answer.settings.paused
    assert (answer.settings.paused_at_ms, answer.settings.resumed_at_ms) == (
        clock.now - 30,
        clock.now,
    )
    await gauges.refresh(broker)
    assert _paused_gauge(broker) == 0


async def test_pausing_twice_keeps_the_first_start(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a paused topic
    first = await _set_paused(broker, True)
    # When it is paused again later
    clock.advance(100)
    again = await _set_paused(broker, True)
    # Then it is paused since the first time
    assert again.settings.paused_at_ms == first.settings.paused_at_ms


async def test_a_pause_of_a_topic_that_does_not_exist_is_refused(broker: BrokerContext) -> None:
    with pytest.raises(NotFound):
        await control.update_topic(broker, pb.UpdateTopicRequest(name="nope", paused=True))
    with pytest.raises(InvalidArgument):
        await control.update_topic(broker, pb.UpdateTopicRequest(name="bad name", paused=True))


async def test_a_topic_created_paused_is_paused_since_its_creation(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a topic created paused (a client's pause times are the broker's to set)
    settings = pb.TopicSettings(buckets=4, paused=True, paused_at_ms=5, resumed_at_ms=7)
    made = await control.create_topic(broker, pb.CreateTopicRequest(name="held", settings=settings))
    assert (made.settings.paused, made.settings.paused_at_ms) == (True, clock.now)
    assert made.settings.resumed_at_ms == 0
    # When a consumer joins and a message falls due, nothing is delivered
    session = Session(broker, "held", "c1", credits=10)
    await settle_down()
    await produce_at(broker, "held", [clock.now + 1])
    await _run(clock, 20)
    assert session.deliveries == []
    await session.close()
