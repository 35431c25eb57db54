"""Gauges over 10,000 topics: one storage call a refresh, never a statement per
topic on the SQLite writer, and the loop is never held for long."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from dejaq.broker.api.topics import TopicCache
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import LocalCoordinator
from dejaq.broker.observability.gauges import refresh
from dejaq.core.model import NewMessage, Topic
from dejaq.storage_plugins.sqlite.storage import SqliteStorage

pytestmark = pytest.mark.timeout(120)
TOPICS = 10_000


async def _largest_stall(work: asyncio.Future[None]) -> float:
    """The longest the loop went without running this ticker while ``work`` ran."""
    largest = 0.0
    last = time.perf_counter()
    while not work.done():
        await asyncio.sleep(0)
        now = time.perf_counter()
        largest = max(largest, now - last)
        last = now
    return largest


@pytest.mark.long
async def test_a_refresh_over_10k_topics_is_one_census_off_the_writer(tmp_path: Path) -> None:
    storage = SqliteStorage(f"sqlite:///{tmp_path / 'g.db'}")
    await storage.open()
    try:
        # Given 10,000 topics, two of them holding messages
        names = [f"t{i:05d}" for i in range(TOPICS)]
        await asyncio.gather(*(storage.create_topic(Topic(n)) for n in names))
        await storage.insert("t00001", [NewMessage(f"a{i}", 1_000 + i, b"x", 0) for i in range(3)])
        await storage.insert("t09999", [NewMessage("b", 4_000_000_000_000, b"y", 1)])
        broker = BrokerContext(BrokerConfig(), storage, LocalCoordinator(), TopicCache(storage))
        calls: list[str] = []
        storage.on_operation = lambda op, seconds, ok: calls.append(op)
        writer = storage._writer
        assert writer is not None
        # When the gauges are refreshed (the first refresh creates every series,
        # and reads the kinds of the topics this broker never read: one call;
        # the busiest keys are read of the one topic with messages due)
        await refresh(broker)
        assert calls == ["census", "list_topics", "keys"]
        calls.clear()
        jobs_before = writer.jobs
        started = time.perf_counter()
        work = asyncio.ensure_future(refresh(broker))
        stall = await _largest_stall(work)
        await work
        took = time.perf_counter() - started
        # Then storage saw one census (and the busy topic's keys), the writer
        # thread no job but that keys read,
        assert calls == ["census", "keys"]
        assert writer.jobs <= jobs_before + calls.count("keys")
        # and every topic's gauges are set, the counts right.
        sample = broker.metrics.registry.get_sample_value

        def value(name: str, topic: str, **labels: str) -> float | None:
            return sample(name, {"topic": topic, "kind": "timeline", **labels})

        assert value("dejaq_messages", "t00001", state="due") == 3
        assert value("dejaq_messages", "t09999", state="waiting") == 1
        assert value("dejaq_messages", "t05000", state="waiting") == 0
        assert (value("dejaq_lag_seconds", "t00001") or 0) > 0
        assert value("dejaq_buckets_owned", "t05000") == 64
        print(
            f"\ngauge refresh of {TOPICS} topics: {took * 1000:.0f} ms,"
            f" largest loop stall {stall * 1000:.1f} ms"
        )
    finally:
        await storage.close()
