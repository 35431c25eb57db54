"""HTTP lease requests as the dispatcher serves them, in-process on a manual
clock: a waiting request holds only what it will be answered with, so several
waiting each hold the next message in turn and each is answered at its
message's millisecond; a message produced due sooner still reaches one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.context import BrokerContext
from dejaq.broker.http.pull import PullReceiver
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb
from tests.broker.inprocess import ManualClock, produce_at, running_broker, settle_down

pytestmark = pytest.mark.timeout(30)
T = "pulled"
SEND_AHEAD_MS = 100  # how far a lease request looks ahead (a gRPC consumer is sent)


@pytest.fixture
async def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    async with running_broker(clock, lookahead_ms=0, send_ahead_ms=SEND_AHEAD_MS) as broker:
        settings = settings_to_pb(TopicSettings(buckets=8, lease_ms=60_000))
        await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
        yield broker


def _answered(requests: list[PullReceiver]) -> list[list[str]]:
    return [[m.id for m, _ in r.taken] for r in requests if r.ready.is_set()]


async def test_waiting_requests_each_hold_the_next_message_and_are_answered_at_its_millisecond(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given 4 messages due 10 to 13 ms from now, 1 ms apart
    now = clock.now
    ids = await produce_at(broker, T, [now + 10, now + 11, now + 12, now + 13])
    # When 3 lease requests of up to 50 wait for them
    dispatcher = broker.dispatcher(await broker.topics.get(T))
    requests = [PullReceiver(f"http-{i}", 60_000, 50, SEND_AHEAD_MS, "http") for i in range(3)]
    for r in requests:
        dispatcher.add(r)
    await settle_down()
    # Then each holds one message, the next in turn, and the fourth stays for
    # whichever polls next: none holds what it would hand back when answered
    counts = await broker.storage.counts(T, clock.now)
    assert (counts.leased, counts.waiting) == (3, 1)
    # And each is answered at its message's millisecond with that message alone
    for ms in range(10, 13):
        clock.advance(ms - (clock.now - now))
        await settle_down()
        assert sorted(_answered(requests)) == sorted([ids[i]] for i in range(ms - 9)), ms


async def test_a_request_holding_a_message_is_answered_with_one_produced_due_sooner(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a lease request holding a message due 50 ms from now
    now = clock.now
    await produce_at(broker, T, [now + 50])
    dispatcher = broker.dispatcher(await broker.topics.get(T))
    request = PullReceiver("http-0", 60_000, 50, SEND_AHEAD_MS, "http")
    dispatcher.add(request)
    await settle_down()
    # When a message due 5 ms from now is produced
    (sooner,) = await produce_at(broker, T, [now + 5])
    await settle_down()
    # Then the request is answered with it at its millisecond, not before
    clock.advance(4)
    await settle_down()
    assert not request.ready.is_set()
    clock.advance(1)
    await settle_down()
    assert [m.id for m, _ in request.taken] == [sooner]
