"""Conversions between the protobuf messages and the data model."""

from __future__ import annotations

from dejaq.core.cron import CronEntry, Misfire
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import Counts, Message, Topic, TopicSettings
from dejaq.proto import dejaq_pb2 as pb


def settings_to_pb(s: TopicSettings) -> pb.TopicSettings:
    return pb.TopicSettings(
        buckets=s.buckets,
        lease_ms=s.lease_ms,
        max_deliveries=s.max_deliveries,
        max_payload_bytes=s.max_payload_bytes,
        dead_retention_ms=s.dead_retention_ms,
        expiry_ms=s.expiry_ms,
        max_rate=s.max_rate,
    )


def settings_from_pb(p: pb.TopicSettings) -> TopicSettings:
    """Zero fields take the defaults."""
    d = TopicSettings()
    return TopicSettings(
        buckets=p.buckets or d.buckets,
        lease_ms=p.lease_ms or d.lease_ms,
        max_deliveries=p.max_deliveries,
        max_payload_bytes=p.max_payload_bytes or d.max_payload_bytes,
        dead_retention_ms=p.dead_retention_ms,
        expiry_ms=p.expiry_ms,
        max_rate=p.max_rate,
    )


def topic_to_pb(t: Topic) -> pb.Topic:
    return pb.Topic(name=t.name, settings=settings_to_pb(t.settings), created_at_ms=t.created_at_ms)


def topic_from_pb(p: pb.Topic) -> Topic:
    return Topic(p.name, settings_from_pb(p.settings), p.created_at_ms)


def counts_to_pb(c: Counts) -> pb.Counts:
    return pb.Counts(waiting=c.waiting, due=c.due, leased=c.leased, dead=c.dead)


def message_to_pb(topic: str, m: Message, now: int) -> pb.Message:
    return pb.Message(
        topic=topic,
        id=m.id,
        timestamp_ms=m.timestamp,
        payload=m.payload,
        version=m.version,
        deliveries=m.deliveries,
        lease_owner=m.lease_owner or "",
        state=m.state(now).value,
        max_deliveries=m.max_deliveries,
        expires_at_ms=m.expires_at,
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
        p.version,
        p.next_ms,
    )
