"""The gauges of each topic's busiest keys: only the top keys have series, a
key that leaves the top loses its series, and they are refreshed with the
other gauges from storage."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from dejaq.broker.api.topics import TopicCache
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import LocalCoordinator
from dejaq.broker.observability.gauges import refresh
from dejaq.broker.observability.key_gauges import TOP_KEYS, KeyGauges
from dejaq.core.model import NewMessage, Topic
from dejaq.storage_plugins.base import KeyLoad
from dejaq.storage_plugins.memory import MemoryStorage

NOW = 1_800_000_000_000


def _keys_with_series(registry: CollectorRegistry, topic: str) -> set[str]:
    return {
        s.labels["key"]
        for metric in registry.collect()
        if metric.name == "dejaq_key_due"
        for s in metric.samples
        if s.labels["topic"] == topic
    }


def test_only_the_top_keys_have_series_and_a_key_leaving_the_top_loses_its_own() -> None:
    registry = CollectorRegistry()
    gauges = KeyGauges(registry)
    # Given more busy keys than the top holds
    loads = [KeyLoad(f"k{i:02d}", 100 - i, 1, NOW - 5_000) for i in range(TOP_KEYS + 5)]
    gauges.report("t", loads, NOW)
    assert _keys_with_series(registry, "t") == {f"k{i:02d}" for i in range(TOP_KEYS)}
    sample = registry.get_sample_value
    assert sample("dejaq_key_due", {"topic": "t", "key": "k00"}) == 100
    assert sample("dejaq_key_lateness_seconds", {"topic": "t", "key": "k00"}) == 5.0
    # When the busiest key drains and a new one leads
    gauges.report("t", [KeyLoad("new", 7, 0, NOW), *loads[1:TOP_KEYS]], NOW)
    # Then the drained key's series are gone, the new one's are there
    shown = _keys_with_series(registry, "t")
    assert "k00" not in shown and "new" in shown and len(shown) == TOP_KEYS
    assert sample("dejaq_key_held", {"topic": "t", "key": "k00"}) is None
    # And forgetting the topic drops every key series it had
    gauges.forget("t")
    assert _keys_with_series(registry, "t") == set()


@pytest.mark.timeout(30)
async def test_the_gauge_refresh_reports_a_topics_busiest_keys() -> None:
    storage = MemoryStorage("memory://")
    await storage.open()
    try:
        await storage.create_topic(Topic("t"))
        await storage.insert(
            "t",
            [NewMessage(f"a{i}", 1_000, b"x", 0, key="acme") for i in range(3)]
            + [NewMessage("b", 2_000, b"x", 1, key="bob")],
        )
        broker = BrokerContext(BrokerConfig(), storage, LocalCoordinator(), TopicCache(storage))
        await refresh(broker)
        sample = broker.metrics.registry.get_sample_value
        assert sample("dejaq_key_due", {"topic": "t", "key": "acme"}) == 3
        assert sample("dejaq_key_due", {"topic": "t", "key": "bob"}) == 1
        # a topic deleted loses its key series with its others
        broker.metrics.forget_topic("t")
        assert sample("dejaq_key_due", {"topic": "t", "key": "acme"}) is None
    finally:
        await storage.close()
