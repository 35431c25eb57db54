"""The ``dejaq_due_ahead`` gauges: the due load within 10 s to 1 h, one
reporting broker a topic."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.produce import produce
from dejaq.broker.api.topics import TopicCache
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import BrokerView, ClusterView, LocalCoordinator
from dejaq.broker.observability import due_ahead
from dejaq.core.wire.batches import encode_messages
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins.memory import MemoryStorage

from .inprocess import LoopTurns, ManualClock

pytestmark = pytest.mark.timeout(60)
SECOND = 1_000
WITHIN = ("10s", "1m", "5m", "10m", "15m", "1h")


class Peers(LocalCoordinator):
    """A single broker's coordinator whose view shows other brokers beside it."""

    def __init__(self, me: str, others: list[str]) -> None:
        super().__init__()
        self.me, self.others = me, others

    def view(self) -> ClusterView:
        brokers = [BrokerView(b, b, 0, 0) for b in [self.me, *self.others]]
        return ClusterView("etcd", "c", self.me, True, brokers)


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    storage = MemoryStorage()
    await storage.open()
    config = BrokerConfig(rescan_ms=3_600_000)
    yield BrokerContext(config, storage, LocalCoordinator(), TopicCache(storage), clock=clock)
    await storage.close()


async def send(
    broker: BrokerContext, topic: str, offsets_s: list[float], clock: ManualClock
) -> None:
    stamps = [clock.now + int(s * SECOND) for s in offsets_s]
    ids = [f"{topic}-{i}" for i in range(len(stamps))]
    batch = encode_messages(stamps, [b"x"] * len(ids), ids)
    await produce(broker, pb.ProduceRequest(topic=topic, batch=batch))


def gauges(broker: BrokerContext, topic: str) -> list[float | None]:
    registry = broker.metrics.registry
    return [
        registry.get_sample_value(
            "dejaq_due_ahead", {"topic": topic, "kind": "timeline", "within": w}
        )
        for w in WITHIN
    ]


async def test_counts_waiting_messages_within_each_window(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a topic with messages due 5 s, 30 s, 4 min, 10 min, 50 min and 2 h ahead
    # (a window holds what is due before its end)
    await control.create_topic(broker, pb.CreateTopicRequest(name="campaign"))
    await send(broker, "campaign", [5, 5, 30, 240, 600, 3000, 7200], clock)
    # When the gauges are refreshed
    await due_ahead.refresh(broker)
    # Then each window counts everything due from now until its end
    assert gauges(broker, "campaign") == [2, 3, 4, 4, 5, 6]
    # When time passes the first two and the refresh runs again
    clock.advance(31 * SECOND)
    await due_ahead.refresh(broker)
    # Then what fell due is no longer ahead
    assert gauges(broker, "campaign") == [0, 0, 1, 2, 2, 3]


async def test_a_deleted_topic_loses_its_series(broker: BrokerContext, clock: ManualClock) -> None:
    await control.create_topic(broker, pb.CreateTopicRequest(name="gone"))
    await send(broker, "gone", [5], clock)
    await due_ahead.refresh(broker)
    assert gauges(broker, "gone")[0] == 1
    await control.delete_topic(broker, pb.DeleteTopicRequest(name="gone"))
    await due_ahead.refresh(broker)
    assert gauges(broker, "gone") == [None] * 6


async def test_one_broker_of_a_cluster_reports_each_topic(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given three brokers on one storage, and twenty topics
    names = [f"t{i}" for i in range(20)]
    for name in names:
        await control.create_topic(broker, pb.CreateTopicRequest(name=name))
        await send(broker, name, [1], clock)
    ids = ["b-1", "b-2", "b-3"]
    reported: dict[str, list[str]] = {name: [] for name in names}
    for me in ids:
        # When each broker (its view of the cluster) refreshes its gauges
        broker.coordinator = Peers(me, [b for b in ids if b != me])
        await due_ahead.refresh(broker)
        for name in names:
            if gauges(broker, name)[0] == 1:
                reported[name].append(me)
    # Then each topic is reported by exactly one broker, and the work is shared
    assert all(len(by) == 1 for by in reported.values())
    assert len({by[0] for by in reported.values()}) > 1
    # and a broker no longer reporting a topic has dropped its series
    assert all(gauges(broker, n)[0] is None for n in names if reported[n] != ["b-3"])


async def test_the_loop_runs_between_the_ranges_of_one_topic(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a topic, and a task that counts the loop's turns
    await control.create_topic(broker, pb.CreateTopicRequest(name="busy"))
    await send(broker, "busy", [5], clock)
    seen: list[int] = []
    turns = LoopTurns()
    forecast = broker.storage.forecast

    async def watched(topic: str, now: int, step_ms: int, bins: int) -> list[int]:
        seen.append(turns.now)
        return await forecast(topic, now, step_ms, bins)

    broker.storage.forecast = watched  # type: ignore[method-assign]
    async with turns:
        # When the gauges are refreshed
        await due_ahead.refresh(broker)
    # Then each range is read in a turn of its own: the deliveries that are due
    # go between (a memory range is read without a pause)
    assert len(seen) == 6
    assert all(later > earlier for earlier, later in itertools.pairwise(seen))
    assert gauges(broker, "busy")[0] == 1
