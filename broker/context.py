"""What every request handler of one broker shares."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from dejaq.broker.clock.guard import ClockGuard
from dejaq.broker.config import BrokerConfig
from dejaq.broker.coordination import Coordinator
from dejaq.broker.dispatch.dispatcher import Dispatcher
from dejaq.broker.dispatch.held import HeldBytes
from dejaq.broker.ids import IdGenerator
from dejaq.broker.observability.activity import ActivityMeter
from dejaq.broker.observability.metrics import Metrics
from dejaq.broker.observability.tracing import BrokerTracing
from dejaq.broker.streams import StreamSlots
from dejaq.broker.webhook_targets import Allowlist
from dejaq.core.buckets import Buckets
from dejaq.core.clock import Clock, WallClock
from dejaq.core.errors import BrokerUnavailable
from dejaq.core.model import Topic
from dejaq.storage_plugins.base import Storage

log = logging.getLogger(__name__)


class Topics(Protocol):
    """The topic settings cache (``broker/api/topics.py``, which checks a name at
    the edge before it reads storage)."""

    on_load: Callable[[Topic], None] | None  # told each topic read from storage

    async def get(self, name: str) -> Topic:
        """The topic, or ``NotFound``; ``InvalidArgument`` for a malformed name."""

    def forget(self, name: str) -> None:
        """Read ``name`` from storage again next time."""

    def clear(self) -> None:
        """Forget every cached topic."""


class CronHook(Protocol):
    """What the handlers tell the broker's cron firers (``broker/cron/firers.py``),
    which the server assembles: they depend on this context, not it on them."""

    async def ensure(self, target: str) -> None:
        """Fire ``target``'s cron timeline on this broker, if it has one."""

    async def forget(self, target: str) -> None:
        """``target`` was deleted: stop firing its entries."""


class ConsumerStream(Protocol):
    """What the broker may do to a consumer's stream from outside it."""

    def fail(self, exc: Exception) -> None:
        """End the stream with ``exc`` after the frames already queued for it."""


# Why a broker stopped by its skew guard ends or refuses a consumer's stream: the
# consumer should move to another broker (the driver does, on UNAVAILABLE).
NOT_SERVING = (
    "this broker does not serve consumers now: its clock is off the cluster's and its"
    " skew guard stopped its dispatch; consume through another broker of the cluster"
)


class WebhookHook(Protocol):
    """What the handlers tell the broker's webhook posters (``broker/webhooks/hooks.py``)."""

    allow: Allowlist  # the targets the operator allows beyond public addresses

    async def changed(self, topic: str) -> None:
        """``topic`` was created, set or deleted: post its messages here, or stop."""


@dataclass
class BrokerContext:
    """One broker's shared state: its config, storage, coordinator, topic cache,
    metrics, clock, and the dispatcher of each topic its consumers read."""

    config: BrokerConfig
    storage: Storage
    coordinator: Coordinator
    topics: Topics
    metrics: Metrics = field(default_factory=Metrics)
    new_id: IdGenerator = field(default_factory=IdGenerator)
    dispatchers: dict[str, Dispatcher] = field(default_factory=dict)
    consumer_ids: set[tuple[str, str]] = field(default_factory=set)  # (topic, consumer)
    consumer_streams: set[ConsumerStream] = field(default_factory=set)  # open Consume streams
    clock: Clock = field(default_factory=WallClock)
    # The skew guard (embedded storage in a cluster); None = the clock is one
    # for every broker (a storage server's) or there is no cluster.
    guard: ClockGuard | None = None
    cron: CronHook | None = None  # fires cron entries (set by the server)
    webhooks: WebhookHook | None = None  # posts webhook topics (set by the server)
    streams: StreamSlots = field(init=False)  # open Produce + Consume streams, bounded
    held: HeldBytes = field(init=False)  # delivery bytes waiting for consumers, bounded
    activity: ActivityMeter = field(init=False)  # topics' recent deliveries, from the metrics
    tracing: BrokerTracing = field(init=False)  # spans of a sample (--trace-sample)

    def __post_init__(self) -> None:
        self.activity = ActivityMeter(self.metrics)
        self.streams = StreamSlots(self.config.max_streams)
        self.held = HeldBytes(self.config.max_held_bytes)
        self.tracing = BrokerTracing(self.config.trace_sample)
        self.topics.on_load = self.metrics.topic_known  # series labelled by topic kind

    def dispatcher(self, topic: Topic) -> Dispatcher:
        """The topic's dispatcher, started on first use."""
        d = self.dispatchers.get(topic.name)
        if d is None:
            d = Dispatcher(
                topic,
                self.storage,
                lambda: self.buckets(topic.name),
                self.config.max_frame_messages,
                self.config.rescan_ms,
                self.metrics,
                self.clock,
                self.lookahead_ms,
                lambda ids, stalled: self.coordinator.stalled(topic.name, ids, stalled),
                self.tracing,
                lambda limit: self.coordinator.key_share(topic.name, topic.settings.buckets, limit),
            )
            d.start()
            self.dispatchers[topic.name] = d
        return d

    def buckets(self, topic: str) -> Buckets:
        """The buckets this broker's consumers of ``topic`` own: none while the
        skew guard holds dispatch back."""
        if self.guard is not None and self.guard.paused:
            return frozenset()
        return self.coordinator.buckets(topic)

    def not_serving(self) -> BrokerUnavailable | None:
        """Why a new Consume stream is refused now (the skew guard stopped this
        broker), or None. Not while the guard waits at start-up to hear the
        others' clocks: that lasts a heartbeat, and a stream opened meanwhile is
        ended if the guard then stops the broker."""
        if self.guard is not None and self.guard.stopped:
            return BrokerUnavailable(NOT_SERVING)
        return None

    def clock_guard_changed(self, paused: bool) -> None:
        """The skew guard stopped or resumed dispatch. Stopped, this broker leases
        nothing, yet its consumers would keep their buckets: their streams end
        (UNAVAILABLE), so they leave the bucket assignment and move to brokers
        that dispatch."""
        self.metrics.clock_guard_paused.set(1 if paused else 0)
        if paused:
            streams = list(self.consumer_streams)
            for stream in streams:
                stream.fail(BrokerUnavailable(NOT_SERVING))
            if streams:
                log.warning("ended %d consumer streams: %s", len(streams), NOT_SERVING)
        else:
            for d in self.dispatchers.values():
                d.poke()

    @property
    def lookahead_ms(self) -> int:
        """The dispatchers' look-ahead: the configured one, else the storage's."""
        configured = self.config.lookahead_ms
        return configured if configured >= 0 else self.storage.lookahead_ms

    @property
    def send_ahead_ms(self) -> int:
        """How early a consumer that holds may be sent a message: the configured
        bound, else the storage's."""
        configured = self.config.send_ahead_ms
        return configured if configured >= 0 else self.storage.send_ahead_ms

    def hint(self, topic: str, timestamp: int) -> None:
        """A message due at ``timestamp`` was stored: wake this broker's dispatcher,
        and tell other brokers (their consumers may own its bucket)."""
        # A priority topic's rank (negative) is due at once: so is time 0.
        timestamp = max(timestamp, 0)
        d = self.dispatchers.get(topic)
        if d is not None:
            d.hint(timestamp)
        self.coordinator.announce(topic, timestamp)

    async def drop_dispatcher(self, topic: str, reason: Exception) -> None:
        """Stop a topic's dispatcher, ending its consumers' streams with ``reason``."""
        d = self.dispatchers.pop(topic, None)
        if d is not None:
            await d.stop()
            for receiver in d.receivers:
                receiver.fail(reason)
