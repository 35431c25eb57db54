"""Conversions between the protobuf messages and the data model."""

from __future__ import annotations

from dejaq.core import headers, priority
from dejaq.core.cron import CronEntry, Misfire
from dejaq.core.errors import InvalidArgument
from dejaq.core.key_limits import KeyLimit
from dejaq.core.model import (
    DEFAULT_DELIVER_BACKOFF_MS,
    DEFAULT_DELIVER_CONCURRENCY,
    DEFAULT_DELIVER_TIMEOUT_MS,
    KIND_PRIORITY,
    KIND_TIMELINE,
    Counts,
    Message,
    Topic,
    TopicSettings,
    Webhook,
)
from dejaq.proto import dejaq_pb2 as pb


def webhook_to_pb(w: Webhook, secret: bool = False) -> pb.Webhook:
    """``secret``: carry the signing secret (the answers of admin calls only)."""
    return pb.Webhook(
        url=w.url,
        timeout_ms=w.timeout_ms,
        concurrency=w.concurrency,
        headers=[pb.Header(name=k, value=v) for k, v in w.headers],
        secret=w.secret if secret else "",
        backoff_ms=w.backoff_ms,
    )


def webhook_from_pb(p: pb.Webhook) -> Webhook:
    """Zero fields take the defaults; nothing is checked here."""
    return Webhook(
        url=p.url,
        timeout_ms=p.timeout_ms or DEFAULT_DELIVER_TIMEOUT_MS,
        concurrency=p.concurrency or DEFAULT_DELIVER_CONCURRENCY,
        headers=tuple((h.name, h.value) for h in p.headers),
        secret=p.secret,
        backoff_ms=p.backoff_ms or DEFAULT_DELIVER_BACKOFF_MS,
    )


def settings_to_pb(s: TopicSettings, secret: bool = False) -> pb.TopicSettings:
    return pb.TopicSettings(
        buckets=s.buckets,
        lease_ms=s.lease_ms,
        max_deliveries=s.max_deliveries,
        max_payload_bytes=s.max_payload_bytes,
        dead_retention_ms=s.dead_retention_ms,
        expiry_ms=s.expiry_ms,
        dedup_window_ms=s.dedup_window_ms,
        max_rate=s.max_rate,
        kind=s.kind,
        priorities=s.priorities,
        aging_ms=s.aging_ms,
        webhook=None if s.webhook is None else webhook_to_pb(s.webhook, secret),
        paused=s.paused,
        paused_at_ms=s.paused_at_ms,
        resumed_at_ms=s.resumed_at_ms,
        key_concurrency=s.key_concurrency,
        key_rate=s.key_rate,
        key_burst=s.key_burst,
        key_overrides=len(s.key_limits),
    )


def settings_from_pb(p: pb.TopicSettings) -> TopicSettings:
    """Zero fields take the defaults (an unset dedup window too; 0 turns it off).
    An empty kind is a timeline; a priority topic's 0 priorities are the default
    count. Nothing is checked here (``broker.validation.settings`` does)."""
    d = TopicSettings()
    kind = p.kind or KIND_TIMELINE
    priorities = p.priorities
    if kind == KIND_PRIORITY and not priorities:
        priorities = priority.DEFAULT_PRIORITIES
    return TopicSettings(
        buckets=p.buckets or d.buckets,
        lease_ms=p.lease_ms or d.lease_ms,
        max_deliveries=p.max_deliveries,
        max_payload_bytes=p.max_payload_bytes or d.max_payload_bytes,
        dead_retention_ms=p.dead_retention_ms,
        expiry_ms=p.expiry_ms,
        dedup_window_ms=(p.dedup_window_ms if p.HasField("dedup_window_ms") else d.dedup_window_ms),
        max_rate=p.max_rate,
        kind=kind,
        priorities=priorities,
        aging_ms=p.aging_ms,
        webhook=webhook_from_pb(p.webhook) if p.HasField("webhook") and p.webhook.url else None,
        paused=p.paused,
        paused_at_ms=p.paused_at_ms,
        resumed_at_ms=p.resumed_at_ms,
        key_concurrency=p.key_concurrency,
        key_rate=p.key_rate,
        key_burst=p.key_burst,
    )


def key_limit_to_pb(o: KeyLimit) -> pb.KeyLimit:
    return pb.KeyLimit(key=o.key, concurrency=o.concurrency, rate=o.rate, burst=o.burst)


def key_limit_from_pb(p: pb.KeyLimit) -> KeyLimit:
    return KeyLimit(
        p.key,
        p.concurrency if p.HasField("concurrency") else None,
        p.rate if p.HasField("rate") else None,
        p.burst if p.HasField("burst") else None,
    )


def topic_to_pb(t: Topic, secret: bool = False) -> pb.Topic:
    """``secret``: carry the webhook's signing secret (admin answers only)."""
    settings = settings_to_pb(t.settings, secret)
    return pb.Topic(name=t.name, settings=settings, created_at_ms=t.created_at_ms)


def topic_from_pb(p: pb.Topic) -> Topic:
    return Topic(p.name, settings_from_pb(p.settings), p.created_at_ms)


def counts_to_pb(c: Counts) -> pb.Counts:
    return pb.Counts(waiting=c.waiting, due=c.due, leased=c.leased, dead=c.dead)


def message_to_pb(topic: Topic, m: Message, now: int) -> pb.Message:
    """A message as users see it: of a priority topic, never its rank but the
    time it became available (core/priority.py), and its priority."""
    shown = m.timestamp
    if priority.is_ranked(shown) and topic.settings.kind == KIND_PRIORITY:
        shown = priority.available_at(topic, m.priority, shown)
    return pb.Message(
        topic=topic.name,
        id=m.id,
        timestamp_ms=shown,
        payload=m.payload,
        version=m.version,
        deliveries=m.deliveries,
        lease_owner=m.lease_owner or "",
        state=m.state(now).value,
        max_deliveries=m.max_deliveries,
        expires_at_ms=m.expires_at,
        priority=m.priority,
        key=m.key,
        headers=headers.decode(m.headers),
    )


_MISFIRE_TO_PB = {
    Misfire.ONCE: pb.CronEntry.ONCE,
    Misfire.SKIP: pb.CronEntry.SKIP,
    Misfire.ALL: pb.CronEntry.ALL,
}
_MISFIRE_FROM_PB: dict[int, Misfire] = {int(v): k for k, v in _MISFIRE_TO_PB.items()}


def misfire_from_pb(value: int) -> Misfire:
    found = _MISFIRE_FROM_PB.get(int(value))
    if found is None:
        raise InvalidArgument(f"unknown misfire policy {value}")
    return found


def cron_to_pb(e: CronEntry) -> pb.CronEntry:
    return pb.CronEntry(
        topic=e.topic,
        id=e.id,
        schedule=e.schedule,
        timezone=e.timezone,
        payload=e.payload,
        start_ms=e.start_ms,
        end_ms=e.end_ms,
        paused=e.paused,
        misfire=_MISFIRE_TO_PB[e.misfire],
        misfire_limit=e.misfire_limit,
        version=e.version,
        next_ms=e.next_ms,
        priority=e.priority,
    )


def cron_from_pb(p: pb.CronEntry) -> CronEntry:
    """Empty fields take the defaults (UTC, a misfire limit of 100)."""
    d = CronEntry(p.topic, p.id, p.schedule)
    return CronEntry(
        p.topic,
        p.id,
        p.schedule,
        p.timezone or d.timezone,
        p.payload,
        p.start_ms,
        p.end_ms,
        p.paused,
        misfire_from_pb(p.misfire),
        p.misfire_limit or d.misfire_limit,
        p.priority,
        p.version,
        p.next_ms,
    )
