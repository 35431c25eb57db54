"""The cluster as the etcd watch shows it: live brokers and each topic's consumers.

Kept apart from etcd so it can be reasoned about (and tested) as plain data:
``view.py`` feeds it the snapshot and then every watch event.

A consumer id is one client. If it shows up under two brokers (it reconnected
to another broker while the first one's keys wait for their lease to
expire), the newest registration (highest create revision) is the one that
counts: the reconnected consumer takes its share at once instead of leaving
it orphaned until the dead broker's lease runs out. Every broker sees the
same revisions, so every broker picks the same one.
"""

from __future__ import annotations

from dataclasses import dataclass

from dejaq.broker.cluster.assignment import Member, owned_by


@dataclass(frozen=True)
class BrokerInfo:
    """A live broker, as its heartbeat describes it."""

    id: str
    address: str
    started_ms: int
    wall_ms: int  # its clock when it wrote its last heartbeat


class Membership:
    """Live brokers (by heartbeat) and the consumers registered under each topic."""

    def __init__(self) -> None:
        self.brokers: dict[str, BrokerInfo] = {}
        # topic -> (broker, consumer) -> create revision of its key
        self._consumers: dict[str, dict[Member, int]] = {}

    def clear(self) -> None:
        """Forget everything (a new snapshot follows)."""
        self.brokers.clear()
        self._consumers.clear()

    def put_broker(self, info: BrokerInfo) -> bool:
        """Record a heartbeat; True when the set of live brokers changed."""
        joined = info.id not in self.brokers
        self.brokers[info.id] = info
        return joined

    def remove_broker(self, broker: str) -> bool:
        """Its key is gone (lease expired or revoked); True when it was known."""
        return self.brokers.pop(broker, None) is not None

    def put_consumer(self, topic: str, broker: str, consumer: str, revision: int) -> None:
        """Record a consumer registration; ``revision`` is its key's create revision."""
        self._consumers.setdefault(topic, {})[(broker, consumer)] = revision

    def remove_consumer(self, topic: str, broker: str, consumer: str) -> None:
        """Its registration under ``broker`` is gone (others of the same id stay)."""
        registered = self._consumers.get(topic)
        if registered is not None:
            registered.pop((broker, consumer), None)
            if not registered:
                del self._consumers[topic]

    def topics(self) -> list[str]:
        """The topics with at least one registered consumer, sorted."""
        return sorted(self._consumers)

    def members(self, topic: str) -> list[Member]:
        """The topic's consumers on live brokers, one per consumer id, sorted."""
        newest: dict[str, tuple[int, str]] = {}
        for (broker, consumer), revision in self._consumers.get(topic, {}).items():
            if broker not in self.brokers:
                continue  # its broker is gone; the key goes with the lease
            seen = newest.get(consumer)
            if seen is None or (revision, broker) > seen:
                newest[consumer] = (revision, broker)
        return sorted((broker, consumer) for consumer, (_, broker) in newest.items())

    def owned(self, topic: str, broker: str, bucket_count: int) -> frozenset[int]:
        """The buckets of ``topic`` that ``broker``'s consumers own."""
        return owned_by(self.members(topic), broker, bucket_count)

    def has_consumers_elsewhere(self, topic: str, broker: str) -> bool:
        """Whether a broker other than ``broker`` may have consumers of ``topic``
        (a registration counts even while its broker's heartbeat is missing)."""
        return any(b != broker for b, _ in self._consumers.get(topic, {}))
