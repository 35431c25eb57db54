"""Refresh the gauges that need storage: messages by state, lag, consumers, buckets,
whether each topic is paused (as the metrics were last told: ``topic_known``),
and each topic's busiest keys (``key_load.py``).

One ``Storage.census`` call a refresh, however many topics: the backends
answer it with one set-based query off their write path (SQL) or with cheap
index reads that yield to the loop (memory, Redis). Setting the gauges of many
topics is itself loop time, so it goes in slices with a yield between them.
It runs on a budget (``budget.py``), so a slow census never takes over the broker.
"""

from __future__ import annotations

import asyncio
import logging

from dejaq.broker.observability import key_load
from dejaq.broker.observability.observed import Observed
from dejaq.core import priority
from dejaq.core.errors import NotFound
from dejaq.storage_plugins.base import TopicCensus

log = logging.getLogger(__name__)
SLICE = 25  # topics' gauges set between two yields to the loop


async def refresh(broker: Observed) -> None:
    """Refresh every gauge once."""
    m = broker.metrics
    # Cluster gauges first: they do not need storage.
    m.coordinator_up.set(1 if broker.coordinator.healthy else 0)
    skews = broker.coordinator.skew_ms().values()
    m.skew.set(max((abs(s) for s in skews), default=0) / 1000)
    now = broker.clock.now_ms()
    census = await broker.storage.census(now)
    if any(not m.knows(name) for name in census):
        # Topics this broker never read (another broker's): one call for their kinds.
        for known in await broker.storage.list_topics():
            m.topic_known(known)
    for n, (name, topic) in enumerate(census.items(), 1):
        gauges = m.topic_gauges(name)
        counts = topic.counts
        for gauge, value in zip(
            gauges.messages, (counts.waiting, counts.due, counts.leased, counts.dead), strict=True
        ):
            gauge.set(value)
        gauges.lag.set(await _lag_ms(broker, name, topic, now) / 1000)
        d = broker.dispatchers.get(name)
        gauges.consumers.set(len(d.receivers) if d else 0)
        owned = broker.coordinator.buckets(name)
        gauges.buckets.set(topic.buckets if owned is None else len(owned))
        gauges.paused.set(1 if m.is_paused(name) else 0)
        if n % SLICE == 0:
            await asyncio.sleep(0)
    await key_load.refresh(broker, census, now)


async def _lag_ms(broker: Observed, name: str, census: TopicCensus, now: int) -> int:
    """How long the topic has been behind at ``now``, in ms: since its oldest live
    timestamp (running leases included: only a past one counts). On a priority
    topic whose oldest is a rank (core/priority.py), since the head (the next
    message to go out) became available, or since an older due message not
    ranked yet (its not-before time come, or a lease run out) was due."""
    since, head = census.oldest, census.head
    if since is not None and head is not None:
        try:
            topic = await broker.topics.get(name)
        except NotFound:
            return 0  # deleted meanwhile
        since = priority.available_at(topic, head.priority, since)
        if head.due is not None:
            since = min(since, head.due)
    return max(0, now - since) if since is not None and since >= 0 else 0
