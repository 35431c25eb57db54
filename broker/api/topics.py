"""Topic settings, cached: they are read on every produce and never change in place."""

from __future__ import annotations

from collections.abc import Callable

from dejaq.broker.api import validation
from dejaq.core.model import Topic
from dejaq.storage_plugins.base import Storage


class TopicCache:
    def __init__(self, storage: Storage) -> None:
        self._storage = storage
        self._topics: dict[str, Topic] = {}
        # Told each topic read from storage (the metrics learn its kind here).
        self.on_load: Callable[[Topic], None] | None = None

    async def get(self, name: str) -> Topic:
        """The topic, or ``NotFound``; ``InvalidArgument`` for a malformed name."""
        topic = self._topics.get(name)
        if topic is None:
            topic = await self._storage.get_topic(validation.topic_name(name))
            self._topics[name] = topic
            if self.on_load is not None:
                self.on_load(topic)
        return topic

    def forget(self, name: str) -> None:
        self._topics.pop(name, None)

    def clear(self) -> None:
        """Forget every cached topic (changes may have been missed)."""
        self._topics.clear()
