"""Conversions between the protobuf messages and the data model."""

from __future__ import annotations

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
        dedup_window_ms=s.dedup_window_ms,
    )


def settings_from_pb(p: pb.TopicSettings) -> TopicSettings:
    """Zero fields take the defaults (an unset dedup window too; 0 turns it off)."""
    d = TopicSettings()
    return TopicSettings(
        buckets=p.buckets or d.buckets,
        lease_ms=p.lease_ms or d.lease_ms,
        max_deliveries=p.max_deliveries,
        max_payload_bytes=p.max_payload_bytes or d.max_payload_bytes,
        dead_retention_ms=p.dead_retention_ms,
        expiry_ms=p.expiry_ms,
        dedup_window_ms=(p.dedup_window_ms if p.HasField("dedup_window_ms") else d.dedup_window_ms),
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
