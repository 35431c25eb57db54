"""Coordination: which buckets of a topic this broker's consumers own.

A cluster runs the etcd coordinator (``broker/cluster/``: membership and
bucket ownership shared through etcd); a single broker runs
``LocalCoordinator``, which owns every bucket. Correctness never depends on the
assignment: the atomic lease in storage is what keeps a message with one holder.
"""

from __future__ import annotations

import abc
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

from dejaq.core.buckets import Buckets
from dejaq.core.clock import now_ms
from dejaq.core.key_shares import bucket_counts, concurrency_share
from dejaq.core.model import Topic


class ClusterListener(Protocol):
    """What a coordinator tells its broker (``broker/cluster/events.py``)."""

    def bucket_count(self, topic: str) -> int | None:
        """The topic's bucket count, if this broker dispatches it."""

    def owners_changed(self, topic: str) -> None:
        """This broker's share of ``topic`` changed: look at it now."""

    def hinted(self, topic: str, timestamp: int) -> None:
        """Another broker stored a message of ``topic`` due at ``timestamp``."""

    async def topic_changed(self, topic: str) -> None:
        """``topic`` was created or deleted somewhere: re-read it from storage."""

    def topics_reset(self) -> None:
        """Topic changes may have been missed (etcd was away): forget cached topics."""


@dataclass(frozen=True)
class BrokerView:
    id: str
    address: str
    started_ms: int
    skew_ms: int | None  # its clock minus this broker's (estimate); None = unknown


@dataclass(frozen=True)
class Ownership:
    broker: str
    consumer: str
    buckets: frozenset[int]


@dataclass(frozen=True)
class ClusterView:
    """Membership as this broker sees it, for ``dejaq cluster status``."""

    mode: str  # "single" | "etcd"
    cluster: str
    broker: str  # this broker's id
    healthy: bool  # the coordinator reaches its backend (always True when single)
    brokers: list[BrokerView] = field(default_factory=list)


class Coordinator(abc.ABC):
    """Membership and bucket ownership. Correctness never depends on it: the
    atomic lease in storage keeps every message with one holder."""

    async def start(self, address: str, listener: ClusterListener) -> None:  # noqa: B027
        """Join the cluster as the broker serving on ``address``."""

    async def stop(self) -> None:  # noqa: B027 - optional hook
        """Leave the cluster."""

    @property
    def healthy(self) -> bool:
        """False while the coordinator cannot reach its backend (etcd)."""
        return True

    @abc.abstractmethod
    def buckets(self, topic: str) -> Buckets:
        """The buckets of ``topic`` that consumers on this broker own (None = all;
        an empty collection when they own none)."""

    @abc.abstractmethod
    async def consumer_joined(self, topic: str, consumer_id: str) -> None: ...

    @abc.abstractmethod
    async def consumer_left(self, topic: str, consumer_id: str) -> None: ...

    def stalled(self, topic: str, consumers: list[str], stalled: bool) -> None:  # noqa: B027
        """This broker's ``consumers`` of ``topic`` stopped taking deliveries while
        messages of their buckets are due (``stalled``), or take them again: while
        stalled they should not count for the bucket assignment (a single broker
        has nobody else to give the buckets to)."""

    def announce(self, topic: str, timestamp: int) -> None:  # noqa: B027 - optional hook
        """A message of ``topic`` due at ``timestamp`` was stored here: tell the
        brokers whose consumers may own it. Must not block."""

    async def topic_created(self, topic: Topic) -> None:  # noqa: B027 - optional hook
        """Tell the other brokers a topic was created here."""

    async def topic_deleted(self, topic: str) -> None:  # noqa: B027 - optional hook
        """Tell the other brokers a topic was deleted here."""

    def shared_secret(self) -> bytes | None:
        """A random secret every broker of the cluster shares (the lease tokens'
        key); None for a broker on its own, which draws its own."""
        return None

    def skew_ms(self) -> dict[str, int]:
        """Each other broker's clock minus this broker's, in ms (estimates)."""
        return {}

    @abc.abstractmethod
    def view(self) -> ClusterView: ...

    @abc.abstractmethod
    def ownership(self, topic: str, bucket_count: int) -> list[Ownership]:
        """Every consumer of ``topic`` in the cluster and the buckets it owns."""

    def key_share(self, topic: str, bucket_count: int, limit: int) -> int:
        """This broker's whole share of a concurrency limit per key of ``topic``
        (``core/key_shares.py``): by largest remainder of the buckets
        its consumers own, so the brokers' shares sum to ``limit``."""
        owners = [(o.broker, len(o.buckets)) for o in self.ownership(topic, bucket_count)]
        return concurrency_share(limit, bucket_counts(owners), self.view().broker)


class LocalCoordinator(Coordinator):
    """A single broker: it owns every bucket of every topic."""

    def __init__(self) -> None:
        # Streams (or HTTP requests) open per consumer: a consumer is listed
        # until its last one closes.
        self.consumers: dict[str, Counter[str]] = {}
        self.address = ""
        self.started_ms = now_ms()

    async def start(self, address: str, listener: ClusterListener) -> None:
        self.address = address

    def buckets(self, topic: str) -> Buckets:
        return None

    async def consumer_joined(self, topic: str, consumer_id: str) -> None:
        self.consumers.setdefault(topic, Counter())[consumer_id] += 1

    async def consumer_left(self, topic: str, consumer_id: str) -> None:
        open_here = self.consumers.get(topic)
        if open_here is not None:
            open_here[consumer_id] -= 1
            if open_here[consumer_id] <= 0:
                del open_here[consumer_id]

    def view(self) -> ClusterView:
        me = BrokerView(self.address, self.address, self.started_ms, 0)
        return ClusterView("single", "", self.address, True, [me])

    def ownership(self, topic: str, bucket_count: int) -> list[Ownership]:
        # One dispatcher leases every bucket for all of them.
        everything = frozenset(range(bucket_count))
        consumers = sorted(self.consumers.get(topic, ()))
        return [Ownership(self.address, c, everything) for c in consumers]
