"""Refresh the gauges that need storage: messages by state, lag, consumers, buckets."""

from __future__ import annotations

import asyncio
import logging

from dejaq.broker.context import BrokerContext
from dejaq.core.errors import DejaqError

log = logging.getLogger(__name__)


async def refresh_forever(broker: BrokerContext, interval_ms: int) -> None:
    while True:
        try:
            await refresh(broker)
        except DejaqError as exc:
            log.debug("gauge refresh skipped: %s", exc)
        except Exception:  # metrics must never take the broker down
            log.exception("gauge refresh failed")
        await asyncio.sleep(interval_ms / 1000)


async def refresh(broker: BrokerContext) -> None:
    m = broker.metrics
    # Cluster gauges first: they do not need storage.
    m.coordinator_up.set(1 if broker.coordinator.healthy else 0)
    skews = broker.coordinator.skew_ms().values()
    m.skew.set(max((abs(s) for s in skews), default=0) / 1000)
    for topic in await broker.storage.list_topics():
        name = topic.name
        m.touch_topic(name)
        now = broker.clock.now_ms()
        counts = await broker.storage.counts(name, now)
        for state in ("waiting", "due", "leased", "dead"):
            m.messages.labels(name, state).set(getattr(counts, state))
        oldest = await broker.storage.next_due(name, None)
        # next_due includes running leases; only a past timestamp is lag.
        m.lag.labels(name).set(max(0, now - oldest) / 1000 if oldest is not None else 0)
        d = broker.dispatchers.get(name)
        m.consumers.labels(name).set(len(d.receivers) if d else 0)
        owned = broker.coordinator.buckets(name)
        m.buckets.labels(name).set(topic.settings.buckets if owned is None else len(owned))
