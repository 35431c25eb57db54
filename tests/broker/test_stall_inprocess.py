"""A dispatcher whose consumers stopped taking deliveries reports them stalled.

In a cluster the coordinator then stops counting them for the bucket
assignment (tests/cluster/test_stalled_consumer.py); here a recording
coordinator shows when the dispatcher says so, on the manual clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import LocalCoordinator
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import ManualClock, Session, make_broker, produce_at, settle_down

pytestmark = pytest.mark.timeout(30)
T = "jobs"
LEASE_MS = 1_000


class Recording(LocalCoordinator):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[str], bool]] = []

    def stalled(self, topic: str, consumers: list[str], stalled: bool) -> None:
        self.calls.append((topic, consumers, stalled))


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    broker = await make_broker(clock, lookahead_ms=0)
    broker.coordinator = Recording()
    settings = settings_to_pb(TopicSettings(buckets=8, lease_ms=LEASE_MS))
    await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
    yield broker
    for d in list(broker.dispatchers):
        await broker.drop_dispatcher(d, RuntimeError("test over"))
    await broker.storage.close()


def calls(broker: BrokerContext) -> list[tuple[str, list[str], bool]]:
    assert isinstance(broker.coordinator, Recording)
    return broker.coordinator.calls


async def test_a_consumer_without_credit_for_a_lease_while_messages_are_due_is_stalled(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer with a credit of 1, and three messages due now
    session = Session(broker, T, "c1", credits=1)
    await settle_down()
    await produce_at(broker, T, [clock.now] * 3)
    await settle_down()
    assert len(session.ids) == 1  # its credit is spent: two wait
    # When it takes no more for just under a lease
    clock.advance(LEASE_MS - 1)
    await settle_down()
    # Then it still counts
    assert calls(broker) == []
    # When the lease has passed
    clock.advance(1)
    await settle_down()
    # Then it is reported stalled
    assert calls(broker) == [(T, ["c1"], True)]
    # When it returns credit
    session.send(pb.ConsumeRequest(credits=5))
    await settle_down()
    # Then it counts again, and gets what waited
    assert calls(broker)[-1] == (T, ["c1"], False)
    assert len(set(session.ids)) == 3
    await session.close()


async def test_a_consumer_without_credit_but_nothing_due_is_not_stalled(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer that acked its one message without returning credit
    session = Session(broker, T, "c1", credits=1)
    await settle_down()
    await produce_at(broker, T, [clock.now])
    await settle_down()
    session.ack(session.deliveries)
    await settle_down()
    # When several leases pass with nothing due
    for _ in range(3):
        clock.advance(LEASE_MS)
        await settle_down()
    # Then it is not reported: it starves nobody
    assert calls(broker) == []
    # When a message becomes due later, and a lease has passed
    await produce_at(broker, T, [clock.now + 10])
    clock.advance(10)
    await settle_down()
    # Then it is reported (at the next look, the re-scan or the message's time)
    clock.advance(broker.config.rescan_ms)
    await settle_down()
    assert calls(broker) == [(T, ["c1"], True)]
    await session.close()
