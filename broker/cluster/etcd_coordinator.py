"""The etcd coordinator: membership and bucket ownership shared through etcd.

The ``Coordinator`` a broker runs with ``--etcd``. It joins two parts and
answers the broker's questions from them:

- ``session.py`` keeps this broker present in etcd: the etcd lease and its
  heartbeat, the consumer keys, hints and topic keys it writes, the watch, and
  riding out an etcd outage (serve on with the last assignment, re-join when
  etcd is back);
- ``view.py`` applies what the watch shows: membership, clock skew, and this
  broker's share of each topic, telling the broker what changed.

At start-up the first session must open within ``etcd_timeout_s``, or the broker
refuses to start with ``CoordinationUnavailable``. Key layout: ``keys.py``;
assignment scheme: ``assignment.py``; hints: ``hints.py``.

etcd load: a heartbeat (a lease refresh and a put) per broker per second, one
write per consumer join or leave, and hints (at most one write in flight per broker).
etcd keeps every revision until it is compacted, so run it with
auto-compaction (``--auto-compaction-mode revision
--auto-compaction-retention 10000``, as ``deploy/local-cluster.sh`` does).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from dejaq.broker.cluster.assignment import assign
from dejaq.broker.cluster.etcd_access import EtcdAccess
from dejaq.broker.cluster.hints import HintPublisher
from dejaq.broker.cluster.keys import Keys, encode
from dejaq.broker.cluster.membership import BrokerInfo
from dejaq.broker.cluster.registrar import Registrar
from dejaq.broker.cluster.session import EtcdSessions
from dejaq.broker.cluster.view import WatchedView
from dejaq.broker.config import BrokerConfig
from dejaq.broker.coordination import (
    BrokerView,
    ClusterListener,
    ClusterView,
    Coordinator,
    Ownership,
)
from dejaq.broker.etcd_endpoints import Endpoint, parse_endpoints
from dejaq.core.buckets import Buckets
from dejaq.core.clock import now_ms
from dejaq.core.key_shares import bucket_counts, concurrency_share
from dejaq.core.model import Topic
from dejaq.storage_plugins.base import Storage

log = logging.getLogger(__name__)
HINT_MARGIN_MS = 100  # beyond the re-scan interval, for skew and scheduling


class EtcdCoordinator(Coordinator):
    """Membership through etcd: this broker owns the union of its consumers' shares.

    Every broker computes the same assignment from the same watched membership
    (``assignment.py``); while they disagree for a watch round-trip, storage's
    atomic lease still gives each message one holder.
    """

    def __init__(
        self,
        endpoints: list[Endpoint],
        cluster: str,
        ttl_s: int = 4,
        timeout_s: float = 5.0,
        skew_warn_ms: int = 50,
        hint_horizon_ms: int = 1000 + HINT_MARGIN_MS,
        access: EtcdAccess | None = None,
    ) -> None:
        self.endpoints = endpoints
        self.cluster = cluster
        self.ttl_s = ttl_s
        self.timeout_s = timeout_s
        keys = Keys(cluster)
        self._keys = keys
        self._local: dict[tuple[str, str], int] = {}  # (topic, consumer) -> open streams here
        self._stalled: set[tuple[str, str]] = set()  # local ones that stopped taking deliveries
        self._hints = HintPublisher(hint_horizon_ms)
        self._registrar = Registrar()
        self._view = WatchedView(keys, skew_warn_ms, self._local_topics)
        self._access = access or EtcdAccess()
        self._sessions = EtcdSessions(
            endpoints, keys, ttl_s, self._view, self._hints, self._registrar, self._access
        )
        self._id = ""
        self._started_ms = now_ms()
        self._storage: Storage | None = None  # checked against the cluster's at start

    @classmethod
    def from_config(cls, config: BrokerConfig, storage: Storage) -> EtcdCoordinator:
        """The coordinator ``dejaq broker --etcd ... --cluster ...`` asks for, on
        ``storage`` (which must be the cluster's: see ``storage_claim.py``)."""
        coordinator = cls(
            parse_endpoints(config.etcd),
            config.cluster,
            config.etcd_ttl_s,
            config.etcd_timeout_s,
            config.skew_warn_ms,
            config.rescan_ms + HINT_MARGIN_MS,
            EtcdAccess.from_config(config),
        )
        coordinator._storage = storage
        return coordinator

    # -- life cycle -----------------------------------------------------------

    async def start(self, address: str, listener: ClusterListener) -> None:
        """Join, or raise ``CoordinationUnavailable`` after ``timeout_s``, or
        ``StorageMismatch`` when the cluster runs on another storage
        (``InvalidArgument`` at once when a TLS or password file cannot be read)."""
        self._access.check()
        self._id = address
        if self._storage is not None:
            self._sessions.storage_identity = await self._storage.identity()
            self._sessions.cluster = self.cluster
        self._view.start(address, listener)
        endpoint = await self._sessions.start(address, self._started_ms, self.timeout_s)
        log.info(
            "joined cluster %r through etcd %s as %s (lease ttl %d s, %d brokers)",
            self.cluster,
            endpoint,
            self._id,
            self.ttl_s,
            len(self._view.members.brokers),
        )

    async def stop(self) -> None:
        """Leave at once: revoking the lease deletes our keys, so the others
        rebalance now rather than after the TTL."""
        await self._sessions.stop()

    def shared_secret(self) -> bytes | None:
        return self._sessions.lease_token_key

    @property
    def healthy(self) -> bool:
        """False while no etcd session is open (the last assignment stays in force)."""
        return self._sessions.healthy

    # -- what the broker asks -------------------------------------------------

    def buckets(self, topic: str) -> Buckets:
        """The union of the shares of this broker's consumers of ``topic``."""
        return self._view.buckets(topic)

    async def consumer_joined(self, topic: str, consumer_id: str) -> None:
        """A stream opened here: register the consumer in etcd (in the background);
        its share comes when the watch shows the registration."""
        key = (topic, consumer_id)
        self._local[key] = self._local.get(key, 0) + 1
        self._stalled.discard(key)  # a new stream starts with credit
        self._registrar.want(self._wanted())

    async def consumer_left(self, topic: str, consumer_id: str) -> None:
        """A stream closed here: unregister the consumer once its last stream is gone."""
        key = (topic, consumer_id)
        left = self._local.get(key, 0) - 1
        if left > 0:
            self._local[key] = left
        else:
            self._local.pop(key, None)
            self._stalled.discard(key)
        self._registrar.want(self._wanted())

    def stalled(self, topic: str, consumers: list[str], stalled: bool) -> None:
        """Unregister consumers that stopped taking deliveries (the others
        rebalance their buckets away); register them again when they take some."""
        keys = {(topic, c) for c in consumers} & self._local.keys()
        if stalled:
            self._stalled |= keys
        else:
            self._stalled -= keys
        self._registrar.want(self._wanted())

    def _wanted(self) -> set[tuple[str, str]]:
        """The consumers to register: those with a stream here, but not stalled."""
        return self._local.keys() - self._stalled

    def announce(self, topic: str, timestamp: int) -> None:
        """Queue a hint for the other brokers, if one of them has a consumer of
        ``topic`` and the hint can matter (``hints.py``)."""
        if self.healthy and self._view.members.has_consumers_elsewhere(topic, self._id):
            self._hints.offer(topic, timestamp, now_ms())

    async def topic_created(self, topic: Topic) -> None:
        value = encode({"created_at_ms": topic.created_at_ms, "buckets": topic.settings.buckets})
        key = self._keys.topic(topic.name)
        await self._sessions.best_effort(f"topic {topic.name} created", lambda c: c.put(key, value))

    async def topic_deleted(self, topic: str) -> None:
        self._hints.forget(topic)
        key, hints = self._keys.topic(topic), self._keys.hints_of(topic)

        async def delete(client: Any) -> None:
            await client.delete(key)
            await client.delete_prefix(hints)

        await self._sessions.best_effort(f"topic {topic} deleted", delete)

    def skew_ms(self) -> dict[str, int]:
        brokers = self._view.members.brokers
        return {b: s for b, s in self._view.skew.all().items() if b in brokers}

    def view(self) -> ClusterView:
        brokers = dict(self._view.members.brokers)
        brokers.setdefault(self._id, BrokerInfo(self._id, self._id, self._started_ms, 0))
        views = [
            BrokerView(
                b.id,
                b.address,
                b.started_ms,
                0 if b.id == self._id else self._view.skew.skew_ms(b.id),
            )
            for b in sorted(brokers.values(), key=lambda b: b.id)
        ]
        return ClusterView("etcd", self.cluster, self._id, self.healthy, views)

    def ownership(self, topic: str, bucket_count: int) -> list[Ownership]:
        shares = assign(self._view.members.members(topic), bucket_count)
        return [Ownership(b, c, frozenset(share)) for (b, c), share in sorted(shares.items())]

    def key_share(self, topic: str, bucket_count: int, limit: int) -> int:
        shares = assign(self._view.members.members(topic), bucket_count)
        owners = [(b, len(share)) for (b, _), share in shares.items()]
        return concurrency_share(limit, bucket_counts(owners), self._id)

    def _local_topics(self) -> Iterator[str]:
        return (topic for topic, _ in self._local)
