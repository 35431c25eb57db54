"""The ``dejaq_due_ahead{topic, kind, within}`` gauges: the due load ahead.

``within`` is one of 10s, 1m, 5m, 10m, 15m and 1h.

For each window of ``WITHIN`` (from now to 10 s ... 1 h ahead), how many waiting
messages of the topic fall due in it (``Storage.forecast``: leased messages do
not count; a priority topic's messages count when they become available).

Cost. A refresh asks storage six ranges a topic, ``[0, 10s)``, ``[10s,
1m)``, ... ``[15m, 1h)``, one bin each, and adds them up (so the ranges
together read the hour once): each is a range
count on the time index (memory: the index entries in the range; SQL: an
index range; Redis: one ZCOUNT a timeline and one on the leased set, a slot).
It runs every ``metrics_refresh_ms`` (5 s by default), range after range with
a yield to the loop between them (a memory topic's range is read at once),
and, as the other gauges, waits at least ``budget.BUDGET`` times as long as
it took before the next one.

In a cluster one broker reports each topic, so a sum over brokers counts it
once: the live broker at ``crc32(topic) mod n`` among the ``n`` in the
cluster view, sorted by id. A broker that stops reporting a topic (a broker
joined or left) drops its series.
"""

from __future__ import annotations

import asyncio
import logging
import zlib

from dejaq.broker.coordination import ClusterView
from dejaq.broker.observability.metrics import DUE_AHEAD_WITHIN
from dejaq.broker.observability.observed import Observed
from dejaq.core.cron import target_of
from dejaq.core.errors import NotFound

log = logging.getLogger(__name__)
# The end of each window in ms from now, as labelled in DUE_AHEAD_WITHIN
ENDS_MS = (10_000, 60_000, 300_000, 600_000, 900_000, 3_600_000)
WITHIN = dict(zip(DUE_AHEAD_WITHIN, ENDS_MS, strict=True))


def reporter(view: ClusterView, topic: str) -> str:
    """The id of the broker that reports ``topic``'s due load."""
    ids = sorted(b.id for b in view.brokers) or [view.broker]
    return ids[zlib.crc32(topic.encode()) % len(ids)]


async def due_ahead(broker: Observed, topic: str, now: int) -> list[int]:
    """Waiting messages of ``topic`` due within each window of ``WITHIN`` from ``now``."""
    totals: list[int] = []
    start = 0
    for end in WITHIN.values():
        [count] = await broker.storage.forecast(topic, now + start, end - start, 1)
        totals.append(count + (totals[-1] if totals else 0))
        start = end
        await asyncio.sleep(0)  # a range read in memory holds the loop: deliveries go between
    return totals


async def refresh(broker: Observed) -> None:
    """Set the gauges of the topics this broker reports; drop the others'."""
    m = broker.metrics
    view = broker.coordinator.view()
    now = broker.clock.now_ms()
    reported: set[str] = set()
    for topic in await broker.storage.list_topics():
        name = topic.name
        if target_of(name) is not None or reporter(view, name) != view.broker:
            continue
        m.topic_known(topic)
        try:
            m.set_due_ahead(name, await due_ahead(broker, name, now))
        except NotFound:
            continue  # deleted meanwhile
        reported.add(name)
        await asyncio.sleep(0)
    for name in m.due_ahead_topics() - reported:
        m.forget_due_ahead(name)
