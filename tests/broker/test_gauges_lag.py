"""The lag gauge on every backend: on a timeline, the age of the oldest due
message; on a priority topic, how long its head (the next message to go out)
has been available, or the age of an older due message not ranked yet; 0 for
an empty topic."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.produce import produce
from dejaq.broker.api.topics import TopicCache
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import LocalCoordinator
from dejaq.broker.observability.gauges import refresh
from dejaq.core.model import KIND_PRIORITY, KIND_TIMELINE, TopicSettings
from dejaq.core.wire.batches import encode_messages
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins import storage_from_url
from tests.storage_plugins.conftest import BACKENDS

from .inprocess import ManualClock

pytestmark = pytest.mark.timeout(60)
P, T = "jobs", "reminders"
SECOND = 1_000


@pytest.fixture(params=list(BACKENDS))
async def broker(
    request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock
) -> AsyncIterator[BrokerContext]:
    storage = storage_from_url(BACKENDS[request.param](request, tmp_path))
    await storage.open()
    config = BrokerConfig(rescan_ms=3_600_000)
    yield BrokerContext(config, storage, LocalCoordinator(), TopicCache(storage), clock=clock)
    await storage.close()


async def create(broker: BrokerContext, name: str, kind: str, aging_ms: int = 0) -> None:
    priorities = 10 if kind == KIND_PRIORITY else 0
    settings = TopicSettings(buckets=8, kind=kind, priorities=priorities, aging_ms=aging_ms)
    request = pb.CreateTopicRequest(name=name, settings=settings_to_pb(settings))
    await control.create_topic(broker, request)


async def send(
    broker: BrokerContext, topic: str, ids: Sequence[str], priorities: Sequence[int], at: int = 0
) -> None:
    """Produce one frame, due (or not before) ``at``: 0 is now."""
    stamps = [at] * len(ids)
    batch = encode_messages(stamps, [b"x"] * len(ids), list(ids), priorities=priorities)
    await produce(broker, pb.ProduceRequest(topic=topic, batch=batch))


async def lag(broker: BrokerContext, topic: str) -> float:
    await refresh(broker)
    value: float = broker.metrics.topic_gauges(topic).lag._value.get()
    return value


@pytest.mark.parametrize("aging_ms", [0, SECOND])
async def test_a_priority_backlog_lags_by_its_heads_wait(
    broker: BrokerContext, clock: ManualClock, aging_ms: int
) -> None:
    # Given a priority topic, and a backlog of mixed priorities produced 20 s
    # apart, with no consumer
    await create(broker, P, KIND_PRIORITY, aging_ms)
    for n, (mid, p) in enumerate([("mid", 5), ("top", 0), ("low", 9), ("top-new", 0)]):
        clock.advance(20 * SECOND if n else 0)
        await send(broker, P, [mid], [p])
    # When the gauges are refreshed 5 s after the last
    clock.advance(5 * SECOND)
    # Then the lag is the wait of the message that goes out first: "top" (made
    # available 45 s ago) by priority alone; with 1 s aging "mid", which waited
    # 20 s longer (20 steps) and is 5 priorities less urgent
    assert await lag(broker, P) == (65.0 if aging_ms else 45.0)
    # and it grows with the clock while nothing is delivered
    clock.advance(SECOND)
    assert await lag(broker, P) == (66.0 if aging_ms else 46.0)


async def test_a_due_message_not_ranked_yet_lags_as_on_a_timeline(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a priority topic with a message not before 1 s from now (no lag yet)
    await create(broker, P, KIND_PRIORITY)
    await send(broker, P, ["later"], [3], at=clock.now + SECOND)
    assert await lag(broker, P) == 0
    # which no consumer has ranked since, and one made available 10 s later
    clock.advance(10 * SECOND)
    await send(broker, P, ["now"], [0])
    clock.advance(SECOND // 2)
    # Then the lag is the larger age: the unranked one's, due 9.5 s ago, not
    # the head's 0.5 s
    assert await lag(broker, P) == 9.5


async def test_an_empty_priority_topic_lags_0(broker: BrokerContext, clock: ManualClock) -> None:
    await create(broker, P, KIND_PRIORITY, aging_ms=SECOND)
    clock.advance(SECOND)
    assert await lag(broker, P) == 0


async def test_a_timeline_lags_by_its_oldest_due_message(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a timeline with a message due 3 s ago, and one due in 1 min
    await create(broker, T, KIND_TIMELINE)
    start = clock.now
    await send(broker, T, ["soon"], [0], at=start + 60 * SECOND)
    assert await lag(broker, T) == 0  # nothing due yet
    await send(broker, T, ["past"], [0], at=start - 3 * SECOND)
    # Then the lag is the age of the past one, as it always was
    assert await lag(broker, T) == 3.0
    clock.advance(61 * SECOND)
    assert await lag(broker, T) == 64.0
