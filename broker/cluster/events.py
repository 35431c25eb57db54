"""The broker's side of the coordinator: what membership changes do to dispatchers."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from dejaq.broker.cron import entries
from dejaq.broker.tasks import Background
from dejaq.core.clock import now_ms
from dejaq.core.errors import DejaqError, NotFound

if TYPE_CHECKING:
    from dejaq.broker.context import BrokerContext

log = logging.getLogger(__name__)


class BrokerEvents:
    """Implements ``ClusterListener`` over a ``BrokerContext``."""

    def __init__(self, broker: BrokerContext) -> None:
        self._broker = broker
        self._background = Background("re-reading a topic's settings")

    def bucket_count(self, topic: str) -> int | None:
        d = self._broker.dispatchers.get(topic)
        return None if d is None else d.topic.settings.buckets

    def owners_changed(self, topic: str) -> None:
        d = self._broker.dispatchers.get(topic)
        if d is not None:
            d.poke()

    def hinted(self, topic: str, timestamp: int) -> None:
        self._hint(topic, timestamp)
        delay_s = (timestamp - now_ms()) / 1000
        if delay_s > 0:
            # The sender skips later hints while this one is pending (hints.py):
            # look at storage again at its time, whatever this dispatcher planned.
            asyncio.get_running_loop().call_later(delay_s, self._hint, topic, timestamp)

    def _hint(self, topic: str, timestamp: int) -> None:
        d = self._broker.dispatchers.get(topic)
        if d is not None:
            d.hint(timestamp)

    async def topic_changed(self, topic: str) -> None:
        """Storage is the truth: drop the cached topic, and the dispatcher too if
        the topic it serves is gone (or was deleted and created again). A new cron
        timeline is fired here too."""
        broker = self._broker
        broker.topics.forget(topic)
        target = entries.target_of(topic)
        if target is not None and broker.cron is not None:
            await broker.cron.ensure(target)
        if broker.webhooks is not None:
            await broker.webhooks.changed(topic)
        d = broker.dispatchers.get(topic)
        if d is None and not broker.metrics.knows(topic):
            return  # nothing here serves or shows it
        try:
            current = await broker.storage.get_topic(topic)
        except NotFound:
            current = None
        except DejaqError as exc:
            log.warning("topic %s changed, but storage cannot tell how: %s", topic, exc)
            return
        if current is not None:
            broker.metrics.topic_known(current)  # whether it is paused, for its gauge
        if d is None:
            return
        stale = current is None or current.created_at_ms != d.topic.created_at_ms
        if stale and broker.dispatchers.get(topic) is d:
            log.info("topic %s was deleted on another broker; closing its consumers here", topic)
            await broker.drop_dispatcher(topic, NotFound(f"topic {topic!r} was deleted"))
        elif current is not None and not stale and current.settings != d.topic.settings:
            d.retune(current)  # changed on another broker (its rate cap, a pause)

    def topics_reset(self) -> None:
        """Changes may have been missed: drop the cached topics, and have each
        dispatcher read its topic again (a pause or resume made meanwhile)."""
        self._broker.topics.clear()
        for topic in list(self._broker.dispatchers):
            self._background.spawn(self.topic_changed(topic))
