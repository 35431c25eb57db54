"""What the storage-backed gauges read of one broker.

``broker/context.py``'s ``BrokerContext`` is what they are given; it stands
above observability (it holds the metrics), so the gauges name only what they
read of it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sized
from typing import Protocol

from dejaq.broker.coordination import Coordinator
from dejaq.broker.observability.metrics import Metrics
from dejaq.core.clock import Clock
from dejaq.core.model import Topic
from dejaq.storage_plugins.base import Storage


class Consumed(Protocol):
    """A topic's dispatcher, as far as the gauges count its consumers."""

    @property
    def receivers(self) -> Sized: ...


class TopicReader(Protocol):
    async def get(self, name: str) -> Topic:
        """The topic, or ``NotFound``."""
        ...


class Observed(Protocol):
    """One broker's state, read-only, as the gauges see it."""

    @property
    def metrics(self) -> Metrics: ...
    @property
    def coordinator(self) -> Coordinator: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def storage(self) -> Storage: ...
    @property
    def dispatchers(self) -> Mapping[str, Consumed]: ...
    @property
    def topics(self) -> TopicReader: ...
