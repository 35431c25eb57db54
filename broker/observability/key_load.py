"""Refresh the gauges of each topic's busiest keys (``key_gauges.py``).

Part of the gauge loop's refresh (``gauges.py``), from its census: one
``Storage.keys`` call a topic, for the timelines with messages due or held
(none for a quiet topic), with a yield to the loop between topics, within
the loop's budget (``budget.py``). In a cluster one broker reports each topic, as with
``dejaq_due_ahead`` (``due_ahead.reporter``), so the series are not repeated
by every broker; a broker that stops reporting a topic drops its series.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from dejaq.broker.observability.due_ahead import reporter
from dejaq.broker.observability.key_gauges import TOP_KEYS
from dejaq.broker.observability.observed import Observed
from dejaq.core.cron import target_of
from dejaq.core.errors import NotFound
from dejaq.core.model import KIND_TIMELINE
from dejaq.storage_plugins.base import TopicCensus


async def refresh(broker: Observed, census: Mapping[str, TopicCensus], now: int) -> None:
    """Set the key gauges of the topics this broker reports; drop the others'."""
    gauges = broker.metrics.keys
    view = broker.coordinator.view()
    reported: set[str] = set()
    for name, topic in census.items():
        if target_of(name) is not None or reporter(view, name) != view.broker:
            continue
        if broker.metrics.kind_of(name) != KIND_TIMELINE:
            continue
        if not (topic.counts.due or topic.counts.leased):
            continue
        try:
            loads = await broker.storage.keys(name, now, TOP_KEYS)
        except NotFound:
            continue  # deleted meanwhile
        gauges.report(name, loads, now)
        reported.add(name)
        await asyncio.sleep(0)
    for name in gauges.topics() - reported:
        gauges.forget(name)
