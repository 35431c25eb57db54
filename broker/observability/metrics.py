"""Prometheus metrics of one broker, served on ``--metrics HOST:PORT`` at /metrics.

Labels stay bounded: a topic name and its kind, a gRPC method and status code,
a storage operation, a message state. Never a message id or a consumer id.

Every per-topic series carries ``kind`` ("timeline" or "priority", from the
topic's settings). The broker tells the metrics a topic's kind when it reads
the topic (``topic_known``, from the topic cache); the labelled children are
resolved once per topic and kept, so counting stays one dict lookup a call. A
topic created again under its name with another kind starts new series.

Counters are updated where things happen (produce, dispatch, settle, control
calls); gauges that need storage (messages by state, lag) are refreshed by a
background task every ``metrics_refresh_ms`` (``DEJAQ_METRICS_REFRESH_MS``)
rather than at scrape time, so a scrape never waits on storage.
"""

from __future__ import annotations

import enum
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from dejaq.broker.observability.key_gauges import KeyGauges
from dejaq.broker.observability.lateness import (
    CAPPED_DOC,
    CAPPED_NAME,
    PAUSED_DOC,
    PAUSED_NAME,
    WAIT_DOC,
    WAIT_NAME,
    LatenessHistogram,
)
from dejaq.broker.observability.series import drop_series
from dejaq.core.model import KIND_PRIORITY, KIND_TIMELINE, Topic

# Push time minus due time: from half a millisecond to a minute.
LATENESS_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
STORAGE_BUCKETS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    1.0,
    5.0,
)


class Event(enum.Enum):
    """What happens to messages, each counted as ``dejaq_<value>_total{topic, kind}``."""

    PRODUCED = "produced"
    DUPLICATES = "duplicates"
    REJECTED = "rejected"
    DELIVERED = "delivered"
    REDELIVERED = "redelivered"
    ACKED = "acked"
    NACKED = "nacked"
    EXTENDED = "extended"
    DEAD_LETTERED = "dead_lettered"
    MOVED = "moved"
    CANCELLED = "cancelled"


MESSAGE_EVENTS = {
    Event.PRODUCED: "Messages accepted by produce",
    Event.DUPLICATES: "Produced messages whose id already existed",
    Event.REJECTED: "Produced messages refused as invalid",
    Event.DELIVERED: "Messages pushed to consumers",
    Event.REDELIVERED: "Deliveries after an expired lease (lease expirations)",
    Event.ACKED: "Messages acknowledged",
    Event.NACKED: "Messages given back with a delay",
    Event.EXTENDED: "Lease extensions",
    Event.DEAD_LETTERED: "Messages moved to the dead timeline",
    Event.MOVED: "Messages rescheduled by a producer",
    Event.CANCELLED: "Messages cancelled by a producer",
}
STATES = ("waiting", "due", "leased", "dead")
# The windows of dejaq_due_ahead, nearest first (broker/observability/due_ahead.py).
DUE_AHEAD_WITHIN = ("10s", "1m", "5m", "10m", "15m", "1h")
TOPIC_LABELS = ("topic", "kind")


class TopicGauges(NamedTuple):
    """One topic's gauge children: messages by state (in ``STATES`` order), lag,
    consumers, buckets owned."""

    messages: tuple[Any, ...]
    lag: Any
    consumers: Any
    buckets: Any
    paused: Any


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.events = {
            event: Counter(f"dejaq_{event.value}", doc, TOPIC_LABELS, registry=r)
            for event, doc in MESSAGE_EVENTS.items()
        }
        self.frames = Counter(
            "dejaq_stream_frames",
            "Frames on the hot-path streams, by stream (produce, consume) and direction"
            " (in: from the client, out: to it)",
            ["stream", "direction"],
            registry=r,
        )
        self._kinds: dict[str, str] = {}  # topic -> kind its series are labelled with
        self._paused: dict[str, bool] = {}  # topic -> paused, as last read
        self._counters: dict[str, dict[Event, Any]] = {}  # topic -> its counter children
        self.lateness = LatenessHistogram(LATENESS_BUCKETS, self.kind_of)
        r.register(self.lateness)
        self.capped_lateness = LatenessHistogram(
            LATENESS_BUCKETS, self.kind_of, CAPPED_NAME, CAPPED_DOC
        )
        r.register(self.capped_lateness)
        self.paused_lateness = LatenessHistogram(
            LATENESS_BUCKETS, self.kind_of, PAUSED_NAME, PAUSED_DOC
        )
        r.register(self.paused_lateness)
        self.keys = KeyGauges(r)  # each topic's busiest keys
        self.paused = Gauge(
            "dejaq_topic_paused",
            "1 while the topic is paused (nothing delivered), 0 while it runs",
            TOPIC_LABELS,
            registry=r,
        )
        self.priority_wait = LatenessHistogram(LATENESS_BUCKETS, self.kind_of, WAIT_NAME, WAIT_DOC)
        r.register(self.priority_wait)
        self.messages = Gauge(
            "dejaq_messages", "Messages by state", [*TOPIC_LABELS, "state"], registry=r
        )
        self.lag = Gauge(
            "dejaq_lag_seconds",
            "How long the topic has been behind: the age of its oldest due, undelivered"
            " message; on a priority topic, how long its head (the next message to go"
            " out) has been available, or longer if a due message is not ranked yet",
            TOPIC_LABELS,
            registry=r,
        )
        self.due_ahead = Gauge(
            "dejaq_due_ahead",
            "Waiting messages due from now to within ahead (leased ones not counted);"
            " one broker of a cluster reports each topic",
            [*TOPIC_LABELS, "within"],
            registry=r,
        )
        self._due_ahead: dict[str, tuple[str, list[Any]]] = {}  # topic -> kind, children
        self.consumers = Gauge(
            "dejaq_consumers", "Consumers connected to this broker", TOPIC_LABELS, registry=r
        )
        self.producers = Gauge(
            "dejaq_producer_streams", "Open produce streams on this broker", registry=r
        )
        self.consumers_cut_off = Counter(
            "dejaq_consumers_cut_off",
            "Consumer streams ended because the consumer stopped reading"
            " (its outbox full, or the most held when all held too much)",
            registry=r,
        )
        self.buckets = Gauge(
            "dejaq_buckets_owned",
            "Buckets owned by this broker's consumers",
            TOPIC_LABELS,
            registry=r,
        )
        self.skew = Gauge(
            "dejaq_clock_skew_seconds",
            "Largest wall-clock difference to another broker (0 when alone)",
            registry=r,
        )
        self.storage_clock_offset = Gauge(
            "dejaq_storage_clock_offset_seconds",
            "The storage server's clock minus this host's, as measured (safe side; 0 without one)",
            registry=r,
        )
        self.storage_clock_uncertainty = Gauge(
            "dejaq_storage_clock_uncertainty_seconds",
            "Round trip of the storage clock's best sample: how far behind it may read",
            registry=r,
        )
        self.clock_guard_paused = Gauge(
            "dejaq_clock_guard_paused",
            "1 while this broker's clock is too far from the cluster's to dispatch (skew guard)",
            registry=r,
        )
        self.storage_up = Gauge("dejaq_storage_up", "1 when storage answers", registry=r)
        self.coordinator_up = Gauge(
            "dejaq_coordinator_up", "1 when the coordinator answers", registry=r
        )
        self.storage_seconds = Histogram(
            "dejaq_storage_operation_seconds",
            "Storage call latency",
            ["operation", "outcome"],
            buckets=STORAGE_BUCKETS,
            registry=r,
        )
        self.requests = Counter(
            "dejaq_grpc_requests",
            "gRPC calls by method and status code",
            ["method", "code"],
            registry=r,
        )
        self.http_requests = Counter(
            "dejaq_http_requests",
            "HTTP/JSON API calls by the Timeline method they serve and the gRPC code",
            ["method", "code"],
            registry=r,
        )
        self.storage_up.set(1)
        self.coordinator_up.set(1)
        self._topic_gauges: dict[str, TopicGauges] = {}

    def frame_counter(self, stream: str, direction: str) -> Any:
        """The counter child of one (stream, direction): resolved once, bumped per frame."""
        return self.frames.labels(stream, direction)

    def topic_known(self, topic: Topic) -> None:
        """The broker read ``topic``'s settings: label its series with its kind,
        and note whether it is paused (``dejaq_topic_paused``). A kind that
        changed (the topic was deleted and created again) drops the series
        labelled with the old one."""
        kind = topic.settings.kind
        labelled = self._kinds.get(topic.name)
        if labelled is not None and labelled != kind:
            self.forget_topic(topic.name)
        self._kinds[topic.name] = kind
        self._paused[topic.name] = topic.settings.paused

    def is_paused(self, topic: str) -> bool:
        """Whether ``topic`` was paused when the broker last read its settings."""
        return self._paused.get(topic, False)

    def knows(self, topic: str) -> bool:
        """True once ``topic``'s series have a kind."""
        return topic in self._kinds

    def kind_of(self, topic: str) -> str:
        """The kind ``topic``'s series are labelled with (a timeline until told)."""
        return self._kinds.get(topic, KIND_TIMELINE)

    def _kind(self, topic: str) -> str:
        """``kind_of``, kept: series created now carry that kind until told otherwise."""
        return self._kinds.setdefault(topic, KIND_TIMELINE)

    def _topic_counters(self, topic: str) -> dict[Event, Any]:
        kind = self._kind(topic)
        children = self._counters[topic] = {
            event: counter.labels(topic, kind) for event, counter in self.events.items()
        }
        return children

    def count(self, event: Event, topic: str, n: int = 1) -> None:
        if n:
            children = self._counters.get(topic) or self._topic_counters(topic)
            children[event].inc(n)

    def storage_clock_synced(self, offset_s: float, uncertainty_s: float) -> None:
        """The storage clock measured its offset again."""
        self.storage_clock_offset.set(offset_s)
        self.storage_clock_uncertainty.set(uncertainty_s)

    def delivered(
        self,
        topic: str,
        now_ms: int,
        due_ms: npt.NDArray[np.int64],
        redelivered: int,
        capped: bool = False,
        paused_ms: npt.NDArray[np.int64] | None = None,
    ) -> None:
        """One dispatch pass: the due times of what it delivered at ``now_ms``;
        ``capped`` when the topic's rate cap held them back (measured apart);
        ``paused_ms``, of each, the part of its wait a pause of the topic caused:
        observed apart, and not counted as the broker's lateness."""
        self._kind(topic)  # the histogram is labelled at scrape time with this kind
        late = now_ms - due_ms
        if paused_ms is not None:
            late = late - paused_ms
            self.paused_lateness.observe(topic, paused_ms[paused_ms > 0])
        (self.capped_lateness if capped else self.lateness).observe(topic, late)
        self.count(Event.DELIVERED, topic, len(due_ms))
        self.count(Event.REDELIVERED, topic, redelivered)

    def delivered_by_priority(
        self, topic: str, waited_ms: npt.NDArray[np.int64], redelivered: int
    ) -> None:
        """One dispatch pass of a priority topic: how long each delivery waited
        from available to delivery (a priority topic has no due time to be late to)."""
        self._kind(topic)  # the histogram is labelled at scrape time with this kind
        self.priority_wait.observe(topic, waited_ms)
        self.count(Event.DELIVERED, topic, len(waited_ms))
        self.count(Event.REDELIVERED, topic, redelivered)

    def storage_op(self, operation: str, seconds: float, ok: bool) -> None:
        self.storage_seconds.labels(operation, "ok" if ok else "error").observe(seconds)

    def request(self, method: str, code: Any) -> None:
        self.requests.labels(method, code.name if hasattr(code, "name") else str(code)).inc()

    def http_request(self, method: str, code: Any) -> None:
        """An HTTP call served (``code`` as the same gRPC call would have got)."""
        name = code.name if hasattr(code, "name") else str(code)
        self.http_requests.labels(method, name).inc()

    def topic_gauges(self, topic: str) -> TopicGauges:
        """A topic's storage-backed gauges, resolved once (its series created at
        zero on first use): a refresh over many topics sets values, it does not
        look label sets up again."""
        gauges = self._topic_gauges.get(topic)
        if gauges is None:
            self.touch_topic(topic)
            kind = self._kind(topic)
            gauges = self._topic_gauges[topic] = TopicGauges(
                tuple(self.messages.labels(topic, kind, state) for state in STATES),
                self.lag.labels(topic, kind),
                self.consumers.labels(topic, kind),
                self.buckets.labels(topic, kind),
                self.paused.labels(topic, kind),
            )
        return gauges

    def set_due_ahead(self, topic: str, counts: list[int]) -> None:
        """A topic's due load within each window of ``due_ahead.WITHIN``."""
        from_here = self._due_ahead.get(topic)
        kind = self._kind(topic)
        if from_here is None or from_here[0] != kind:
            self.forget_due_ahead(topic)
            children = [self.due_ahead.labels(topic, kind, w) for w in DUE_AHEAD_WITHIN]
            from_here = self._due_ahead[topic] = (kind, children)
        for child, count in zip(from_here[1], counts, strict=True):
            child.set(count)

    def due_ahead_topics(self) -> set[str]:
        """The topics whose due load this broker reports."""
        return set(self._due_ahead)

    def forget_due_ahead(self, topic: str) -> None:
        """Drop a topic's due-ahead series (deleted, or reported by another broker)."""
        entry = self._due_ahead.pop(topic, None)
        if entry is not None:
            drop_series(self.due_ahead, topic, entry[0], each=DUE_AHEAD_WITHIN)

    def touch_topic(self, topic: str) -> None:
        """Create a topic's series at zero, so a rate over them exists before the
        first event (a missing series reads as "no data", not as 0)."""
        if topic not in self._counters:
            self._topic_counters(topic)
        if self._kind(topic) == KIND_PRIORITY:
            self.priority_wait.labels(topic)
        else:
            self.lateness.labels(topic)
            self.capped_lateness.labels(topic)
            self.paused_lateness.labels(topic)

    def forget_topic(self, topic: str) -> None:
        """Drop a topic's series (deleted, or its kind changed) so label sets do
        not pile up."""
        self.forget_due_ahead(topic)
        self.keys.forget(topic)
        kind = self._kinds.pop(topic, None)
        self._paused.pop(topic, None)
        self._topic_gauges.pop(topic, None)
        self._counters.pop(topic, None)
        self.lateness.remove(topic)
        self.capped_lateness.remove(topic)
        self.paused_lateness.remove(topic)
        self.priority_wait.remove(topic)
        if kind is None:  # never labelled: no series to drop
            return
        per_topic = (*self.events.values(), self.lag, self.consumers, self.buckets, self.paused)
        for metric in per_topic:
            drop_series(metric, topic, kind)
        drop_series(self.messages, topic, kind, each=STATES)
