"""What the etcd watch means to this broker: who is there, and its share of each topic.

The session (``session.py``) hands over the cluster's prefix as each new
session read it (``load``), then every watch event (``put``, ``delete``).
This module applies them:

- ``brokers/*`` and ``consumers/*`` update the ``Membership``; a change
  recomputes this broker's share of each topic it serves and tells the broker
  which topics' shares changed (``ClusterListener.owners_changed``);
- another broker's heartbeat is a clock sample for the ``SkewTracker``;
- another broker's ``hints/*`` wake the topic's dispatcher (``hinted``);
- ``topics/*`` make the broker re-read the topic from storage
  (``topic_changed``), in the background so storage never holds up the watch.

A snapshot replaces the whole membership, and topic changes may have been
missed while no session was open, so ``load`` also tells the broker to forget
its cached topics (``topics_reset``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from dejaq.broker.cluster.keys import Key, Keys, Kind, decode
from dejaq.broker.cluster.membership import BrokerInfo, Membership
from dejaq.broker.cluster.skew import SkewTracker
from dejaq.broker.coordination import ClusterListener
from dejaq.broker.tasks import Background
from dejaq.core.clock import now_ms

log = logging.getLogger(__name__)
NOTHING: frozenset[int] = frozenset()


class WatchedView:
    """The cluster as this broker's etcd watch shows it, and this broker's share.

    A ``session.WatchSink``. ``members`` and ``skew`` are the watched state;
    ``buckets(topic)`` is the union of the shares of this broker's consumers
    of ``topic`` as of the last event applied.
    """

    def __init__(
        self, keys: Keys, skew_warn_ms: int, local_topics: Callable[[], Iterable[str]]
    ) -> None:
        """``local_topics``: the topics with a consumer stream open on this broker."""
        self.members = Membership()
        self.skew = SkewTracker(skew_warn_ms)
        self._keys = keys
        self._local_topics = local_topics
        self._owned: dict[str, frozenset[int]] = {}  # topic -> buckets of our consumers
        self._id = ""  # set by start
        self._listener: ClusterListener | None = None
        self._background = Background("handling a topic change")

    def start(self, broker_id: str, listener: ClusterListener) -> None:
        """Apply events as broker ``broker_id``, telling ``listener`` what they change."""
        self._id = broker_id
        self._listener = listener

    def buckets(self, topic: str) -> frozenset[int]:
        """The buckets of ``topic`` that this broker's consumers own (none if no consumer)."""
        return self._owned.get(topic, NOTHING)

    # -- the WatchSink ----------------------------------------------------------

    def load(self, snapshot: Iterable[tuple[bytes, bytes, int]]) -> None:
        """Replace the view with a snapshot of the prefix."""
        self.members.clear()
        for raw, value, revision in snapshot:
            key = self._keys.parse(raw)
            if key is not None:
                self._apply_put(key, value, revision)
        assert self._listener is not None
        self._listener.topics_reset()
        self._rebalance()

    def put(self, raw: bytes, value: bytes, revision: int) -> None:
        """Apply a key written (heartbeats included); ``revision`` is its create revision."""
        key = self._keys.parse(raw)
        if key is None:
            return
        assert self._listener is not None
        if key.kind is Kind.HINT:
            if key.broker != self._id and (ts := _int(value.decode(errors="replace"))):
                self._listener.hinted(key.topic, ts)
        elif key.kind is Kind.TOPIC:
            self._topic_changed(key.topic)
        else:
            if key.kind is Kind.BROKER and key.broker != self._id:
                wall = _int(decode(value).get("wall_ms"))
                if wall:
                    self.skew.observe(key.broker, wall, now_ms())
            if self._apply_put(key, value, revision):
                if key.kind is Kind.BROKER:
                    log.info("broker %s joined the cluster", key.broker)
                self._rebalance()

    def delete(self, raw: bytes) -> None:
        """Apply a key deleted or expired with its lease."""
        key = self._keys.parse(raw)
        if key is None:
            return
        if key.kind is Kind.BROKER:
            if self.members.remove_broker(key.broker):
                log.info("broker %s left the cluster", key.broker)
                self.skew.forget(key.broker)
                self._rebalance()
        elif key.kind is Kind.CONSUMER:
            self.members.remove_consumer(key.topic, key.broker, key.consumer)
            self._rebalance()
        elif key.kind is Kind.TOPIC:
            self._topic_changed(key.topic)

    # -- applying ---------------------------------------------------------------

    def _apply_put(self, key: Key, value: bytes, revision: int) -> bool:
        """Apply a membership key; True when membership changed."""
        if key.kind is Kind.BROKER:
            v = decode(value)
            info = BrokerInfo(
                key.broker,
                str(v.get("address", key.broker)),
                _int(v.get("started_ms")),
                _int(v.get("wall_ms")),
            )
            return self.members.put_broker(info)
        if key.kind is Kind.CONSUMER:
            self.members.put_consumer(key.topic, key.broker, key.consumer, revision)
            return True
        return False

    def _topic_changed(self, topic: str) -> None:
        # In the background: it reads storage, which must not hold up the watch.
        assert self._listener is not None
        self._background.spawn(self._listener.topic_changed(topic))

    def _rebalance(self) -> None:
        """Recompute this broker's share of each topic it serves; tell what changed."""
        assert self._listener is not None
        for topic in set(self._local_topics()) | set(self._owned):
            count = self._listener.bucket_count(topic)
            owned = NOTHING if count is None else self.members.owned(topic, self._id, count)
            if owned == self._owned.get(topic, NOTHING):
                continue
            if owned:
                self._owned[topic] = owned
            else:
                self._owned.pop(topic, None)
            log.info(
                "topic %s: this broker's consumers now own %d of %s buckets",
                topic,
                len(owned),
                count,
            )
            self._listener.owners_changed(topic)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0
