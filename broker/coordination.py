"""Coordination: which buckets of a topic this broker's consumers own.

A cluster runs the etcd coordinator (membership and bucket ownership shared
through etcd); a single broker runs ``LocalCoordinator``, which owns every
bucket. Correctness never depends on the assignment: the atomic lease in
storage is what keeps a message with one holder.
"""

from __future__ import annotations

import abc

from dejaq.storage_plugins.base import Buckets


class Coordinator(abc.ABC):
    async def start(self) -> None:  # noqa: B027 - optional hook
        """Join the cluster."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Leave the cluster."""

    @abc.abstractmethod
    def buckets(self, topic: str) -> Buckets:
        """The buckets of ``topic`` that consumers on this broker own (None = all)."""

    @abc.abstractmethod
    async def consumer_joined(self, topic: str, consumer_id: str) -> None: ...

    @abc.abstractmethod
    async def consumer_left(self, topic: str, consumer_id: str) -> None: ...


class LocalCoordinator(Coordinator):
    """A single broker: it owns every bucket of every topic."""

    def __init__(self) -> None:
        self.consumers: dict[str, set[str]] = {}

    def buckets(self, topic: str) -> Buckets:
        return None

    async def consumer_joined(self, topic: str, consumer_id: str) -> None:
        self.consumers.setdefault(topic, set()).add(consumer_id)

    async def consumer_left(self, topic: str, consumer_id: str) -> None:
        self.consumers.get(topic, set()).discard(consumer_id)
