"""A topic's rate cap in-process, on a manual clock: a burst due at one
millisecond drains in due order at the cap, never early, and its lateness is
measured apart from the broker's own."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.context import BrokerContext
from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import ManualClock, Session, produce_at, running_broker, settle_down

pytestmark = pytest.mark.timeout(60)
T = "campaign"
RATE = 2_000.0  # 2 a millisecond
BURST = 1_000


@contextlib.asynccontextmanager
async def capped(
    clock: ManualClock, lookahead_ms: int = 0, send_ahead_ms: int = 25
) -> AsyncIterator[BrokerContext]:
    """A broker with topic T capped at RATE, closed after the block."""
    async with running_broker(clock, lookahead_ms, send_ahead_ms) as broker:
        settings = settings_to_pb(TopicSettings(buckets=8, max_rate=RATE))
        await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
        yield broker


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    async with capped(clock) as broker:
        yield broker


async def _sent_by_ms(clock: ManualClock, session: Session, due: int, steps: int) -> dict[int, int]:
    """Run the clock ``steps`` ms, one at a time: deliveries sent by each ms, from ``due``."""
    sent_by: dict[int, int] = {}
    for _ in range(steps):
        clock.advance(1)
        await settle_down()
        sent_by[clock.now - due] = len(session.deliveries)
    return sent_by


def _capped_count(broker: BrokerContext) -> int:
    return sum(s.counts.sum() for s in broker.metrics.capped_lateness._series.values())


def _free_count(broker: BrokerContext) -> int:
    return sum(s.counts.sum() for s in broker.metrics.lateness._series.values())


async def test_a_burst_drains_at_the_cap_in_due_order_never_early(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer with room for everything, and a burst due at one ms (plus
    # a later one, due within the drain, that must wait its turn in due order)
    session = Session(broker, T, "c1", credits=10_000)
    await settle_down()
    due = clock.now + 10
    ids = await produce_at(broker, T, [due] * BURST)
    later = await produce_at(broker, T, [due + 100])
    await settle_down()
    # When the clock runs one millisecond at a time through the burst
    sent_by = await _sent_by_ms(clock, session, due, 700)
    # Then nothing went before its millisecond, and each ms sent what the cap allowed:
    # a first token, then 2 a millisecond
    assert sent_by[-1] == 0
    for ms in (0, 50, 100, 250, 400):
        allowed = 1 + int(RATE / 1000 * ms) + int(RATE / 100)  # plus at most 10 ms of burst
        assert sent_by[ms] <= allowed, (ms, sent_by[ms])
        assert sent_by[ms] >= int(RATE / 1000 * ms) - 2, (ms, sent_by[ms])
    assert len(session.deliveries) == BURST + 1
    assert all(d.timestamp <= clock.now for d in session.deliveries)
    # in due order: the later message after the whole burst, the burst before it
    assert session.ids[-1] == later[0]
    assert set(session.ids[:-1]) == set(ids)
    # And the lateness the cap caused is counted apart from the broker's own: only
    # the first pass (the tokens saved up before the burst, at most 10 ms worth)
    # went out on time, not held back
    assert _free_count(broker) <= 1 + RATE / 100
    assert _capped_count(broker) + _free_count(broker) == BURST + 1
    await session.close()


@pytest.mark.parametrize(("lookahead_ms", "hold_ms"), [(20, 0), (0, 100), (20, 100)])
async def test_looking_or_sending_ahead_does_not_spend_the_cap_before_the_burst_is_due(
    clock: ManualClock, lookahead_ms: int, hold_ms: int
) -> None:
    # Given a broker that looks ahead, or a consumer that holds what is sent
    # ahead (each released at its millisecond), and a burst due at one ms
    async with capped(clock, lookahead_ms, send_ahead_ms=100) as broker:
        session = Session(broker, T, "c1", credits=10_000, hold_ms=hold_ms)
        await settle_down()
        due = clock.now + 200
        await produce_at(broker, T, [due] * BURST)
        await settle_down()
        # When the clock runs through the time before it and into it
        out_by = await _sent_by_ms(clock, session, due, 400)
        # Then by each millisecond no more went out (to be released at `due`)
        # than the cap allows from `due` on, plus at most 10 ms of burst
        for ms in (-1, 0, 50, 100, 150):
            allowed = 1 + max(0, int(RATE / 1000 * ms)) + int(RATE / 100)
            assert out_by[ms] <= allowed, (ms, out_by[ms])
        assert out_by[150] >= int(RATE / 1000 * 150) - 2
        await session.close()


async def test_lifting_the_cap_lets_the_rest_go_at_once(
    broker: BrokerContext, clock: ManualClock
) -> None:
    session = Session(broker, T, "c1", credits=10_000)
    await settle_down()
    await produce_at(broker, T, [clock.now] * BURST)
    for _ in range(10):
        clock.advance(1)
        await settle_down()
    assert len(session.deliveries) < 100
    topic = await control.update_topic(broker, pb.UpdateTopicRequest(name=T, no_max_rate=True))
    assert topic.settings.max_rate == 0
    clock.advance(1)
    await settle_down()
    assert len(session.deliveries) == BURST
    await session.close()


async def test_a_cap_set_while_running_takes_effect_and_is_stored(
    broker: BrokerContext, clock: ManualClock
) -> None:
    await control.update_topic(broker, pb.UpdateTopicRequest(name=T, no_max_rate=True))
    session = Session(broker, T, "c1", credits=10_000)
    await settle_down()
    await control.update_topic(broker, pb.UpdateTopicRequest(name=T, max_rate=1000.0))
    assert (await broker.storage.get_topic(T)).settings.max_rate == 1000.0
    await produce_at(broker, T, [clock.now] * 500)
    for _ in range(100):
        clock.advance(1)
        await settle_down()
    assert 90 <= len(session.deliveries) <= 115  # 1 a ms, plus at most 10 ms of burst
    await session.close()


@pytest.mark.parametrize(
    "request_",
    [
        pb.UpdateTopicRequest(name=T, max_rate=0.0),
        pb.UpdateTopicRequest(name=T, max_rate=-5.0),
        pb.UpdateTopicRequest(name=T, max_rate=float("nan")),
        pb.UpdateTopicRequest(name=T, max_rate=float("inf")),
        pb.UpdateTopicRequest(name=T),
        pb.UpdateTopicRequest(name=T, max_rate=5.0, no_max_rate=True),
    ],
)
async def test_a_bad_update_is_refused_and_changes_nothing(
    broker: BrokerContext, request_: pb.UpdateTopicRequest
) -> None:
    with pytest.raises(InvalidArgument):
        await control.update_topic(broker, request_)
    assert (await broker.storage.get_topic(T)).settings.max_rate == RATE


async def test_an_update_of_an_unknown_topic_is_not_found(broker: BrokerContext) -> None:
    with pytest.raises(NotFound):
        await control.update_topic(broker, pb.UpdateTopicRequest(name="nope", max_rate=5.0))


@pytest.mark.parametrize("rate", [-1.0, float("nan"), float("inf"), 1e12])
async def test_a_topic_with_a_bad_rate_is_not_created(broker: BrokerContext, rate: float) -> None:
    settings = settings_to_pb(TopicSettings(max_rate=rate))
    with pytest.raises(InvalidArgument):
        await control.create_topic(broker, pb.CreateTopicRequest(name="bad", settings=settings))
    assert [t.name for t in await broker.storage.list_topics()] == [T]
