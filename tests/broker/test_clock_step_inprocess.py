"""A step of the broker's own wall clock, in-process: on embedded storage in a
cluster the broker's clock decides, so when it steps ahead the next reading
stops dispatch and ends its consumers' streams (they move to a broker that
dispatches); what the look-ahead window held for them goes back to the
timeline, to leave at its millisecond as measured. The host's wall and monotonic clocks are the
test's (``HostClocks``); "early" is judged by the monotonic one, which no step
moves."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.topics import TopicCache
from dejaq.broker.clock.guard import ClockGuard
from dejaq.broker.clock.guarded import GuardedClock
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import BrokerView, ClusterView, LocalCoordinator
from dejaq.core.errors import BrokerUnavailable
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins.memory import MemoryStorage

from .inprocess import HostClocks, Session, produce_at, settle_down, stop

pytestmark = pytest.mark.timeout(30)
T = "jobs"
STEP_MS = 400
BOUND = 100
# This broker and a peer whose clock agrees with its own.
PEER_ON_TIME = ClusterView(
    "etcd", "c", "me", True, [BrokerView("me", "me", 0, 0), BrokerView("b0", "b0", 0, 0)]
)


@pytest.fixture
async def host() -> HostClocks:
    return HostClocks()


@pytest.fixture
async def broker(host: HostClocks) -> AsyncIterator[BrokerContext]:
    """A broker whose guard has judged its clock on time (a peer at skew 0)."""
    guard = ClockGuard(BOUND, clocks=host)
    guard.update(PEER_ON_TIME)
    storage = MemoryStorage("memory://")
    await storage.open()
    config = BrokerConfig(rescan_ms=3_600_000, lookahead_ms=20, send_ahead_ms=25)
    broker = BrokerContext(
        config,
        storage,
        LocalCoordinator(),
        TopicCache(storage),
        clock=GuardedClock(guard, host),
        guard=guard,
    )
    guard.on_change = broker.clock_guard_changed
    settings = settings_to_pb(TopicSettings(buckets=8, lease_ms=1_000))
    await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
    yield broker
    await stop(broker)


async def _look_again(broker: BrokerContext) -> None:
    broker.dispatchers[T].poke()
    await settle_down()


async def test_a_step_ahead_stops_dispatch_and_moves_its_consumers_nothing_early(
    broker: BrokerContext, host: HostClocks
) -> None:
    guard = broker.guard
    assert guard is not None and not guard.paused
    # Given a consumer, a message taken ahead into the window (due in 15 ms)
    # and one due in 300 ms
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    start = host.wall_ms
    soon, later = await produce_at(broker, T, [start + 15, start + 300])
    await settle_down()
    assert session.ids == []
    # When the wall clock steps 400 ms ahead (both are due by it), the monotonic running on
    host.step(STEP_MS)
    await _look_again(broker)
    # Then dispatch stops at once, nothing leaves, and the consumer's stream
    # ends as unavailable (it is to move to a broker that dispatches)
    assert guard.paused
    await asyncio.wait_for(session.ended(), 5)
    assert session.ids == []
    assert isinstance(session.error, BrokerUnavailable), session.error
    # and a consumer that comes now is refused the same way
    refused = Session(broker, T, "c2", credits=10)
    await asyncio.wait_for(refused.ended(), 5)
    assert isinstance(refused.error, BrokerUnavailable), refused.error
    assert refused.ids == []
    # When the clock is stepped back and the guard judges it again
    host.step(-STEP_MS)
    guard.update(PEER_ON_TIME)
    assert not guard.paused
    # Then a consumer is served again: the message held for the first one is
    # back on the timeline, and each leaves at its millisecond, never before
    again = Session(broker, T, "c3", credits=10)
    await _look_again(broker)
    assert again.ids == []
    host.advance(15)
    await _look_again(broker)
    assert again.ids == [soon]
    host.advance(300 - 15)
    await _look_again(broker)
    assert again.ids == [soon, later]
    assert all(d.timestamp <= host.wall_ms for d in again.deliveries)
    await again.close()
