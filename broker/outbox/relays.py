"""The relays of the outboxes named by ``--outbox``, one task each."""

from __future__ import annotations

import asyncio

from dejaq.broker.context import BrokerContext
from dejaq.broker.outbox.handoff import BrokerHandOff
from dejaq.outbox.relay import Relay, RelayMetrics


def start(broker: BrokerContext) -> list[asyncio.Task[None]]:
    """A relay task for each outbox of the broker's config, its metrics in the
    broker's registry."""
    urls = broker.config.outboxes
    if not urls:
        return []
    metrics = RelayMetrics(broker.metrics.registry)
    return [
        asyncio.create_task(Relay(url, BrokerHandOff(broker), metrics=metrics).run())
        for url in urls
    ]
