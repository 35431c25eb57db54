"""The broker's posters: one per webhook topic in storage, kept in step with them.

A topic gets a webhook when it is created with one or set (here, or on another
broker: the cluster's topic-changed event says so) and loses it when set
without one or deleted. ``refresh`` reconciles with storage at start-up and
every ``REFRESH_S``, as a backstop for a missed event.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from dejaq.broker.tasks import pause
from dejaq.broker.webhook_targets import Allowlist
from dejaq.broker.webhooks.metrics import WebhookMetrics
from dejaq.broker.webhooks.poster import Poster
from dejaq.core.errors import DejaqError, NotFound
from dejaq.core.model import Topic

if TYPE_CHECKING:
    from dejaq.broker.context import BrokerContext

log = logging.getLogger(__name__)
REFRESH_S = 10.0


class WebhookPosters:
    def __init__(self, broker: BrokerContext) -> None:
        self._broker = broker
        self._posters: dict[str, Poster] = {}
        self._lock = asyncio.Lock()
        self.allow = Allowlist.parse(broker.config.webhook_allow)
        # One consumer id per broker process: a restarted broker is a new consumer,
        # and the leases its predecessor held run out as any consumer's would.
        self.consumer_id = f"webhook-{uuid.uuid4().hex[:12]}"
        self.metrics = WebhookMetrics(broker.metrics.registry, broker.metrics.kind_of)

    async def changed(self, name: str) -> None:
        """``name`` was created, set or deleted: post its messages here or stop."""
        try:
            topic: Topic | None = await self._broker.storage.get_topic(name)
        except NotFound:
            topic = None
        async with self._lock:
            await self._apply(name, topic)

    async def _apply(self, name: str, topic: Topic | None) -> None:
        poster = self._posters.get(name)
        if topic is None or topic.settings.webhook is None:
            if poster is not None:
                await self._drop(name)
            return
        if poster is not None:
            if poster.running and poster.topic.created_at_ms == topic.created_at_ms:
                if poster.topic.settings != topic.settings:
                    poster.retune(topic)
                return
            await self._drop(name)
        broker = self._broker
        poster = Poster(broker, topic, self.consumer_id, self.allow, self.metrics)
        self._posters[name] = poster
        broker.consumer_ids.add((name, self.consumer_id))
        poster.start(broker.dispatcher(topic))
        await broker.coordinator.consumer_joined(name, self.consumer_id)
        log.info("posting the messages of %s to its webhook", name)

    async def _drop(self, name: str) -> None:
        poster = self._posters.pop(name, None)
        if poster is None:
            return
        await poster.stop()
        self.metrics.forget(name)
        self._broker.consumer_ids.discard((name, self.consumer_id))
        await self._broker.coordinator.consumer_left(name, self.consumer_id)

    async def refresh(self) -> None:
        """Post every webhook topic storage has; stop those that are gone."""
        topics = {t.name: t for t in await self._broker.storage.list_topics()}
        async with self._lock:
            for name in sorted(set(topics) | set(self._posters)):
                await self._apply(name, topics.get(name))

    async def run_forever(self, interval_s: float = REFRESH_S) -> None:
        while True:
            try:
                await self.refresh()
            except DejaqError as exc:
                log.warning("webhooks: could not list topics: %s", exc)
            await pause(interval_s)

    async def stop(self) -> None:
        async with self._lock:
            for name in list(self._posters):
                await self._drop(name)
