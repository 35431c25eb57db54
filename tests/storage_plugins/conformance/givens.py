"""What the conformance stories share: a topic, messages, a lease pass, time as a number."""

from __future__ import annotations

import dataclasses

from dejaq.core.buckets import Buckets
from dejaq.core.model import InsertStatus, Leases, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import Storage
from dejaq.storage_plugins.base import LeaseRequest

T = "timeline"
NOW = 1_000_000
LEASE = 1_000
C1, C2 = "consumer-1", "consumer-2"
ACCEPTED, DUPLICATE = InsertStatus.ACCEPTED, InsertStatus.DUPLICATE


def msg(
    id: str,
    ts: int = NOW,
    bucket: int = 0,
    payload: bytes | None = None,
    max_deliveries: int = 0,
    expires_at: int = 0,
    key: str = "",
    headers: bytes = b"",
) -> NewMessage:
    body = id.encode() if payload is None else payload
    return NewMessage(id, ts, body, bucket, max_deliveries, expires_at, 0, key, headers)


async def given_topic(
    storage: Storage, name: str = T, buckets: int = 4, dedup_window_ms: int | None = None
) -> Topic:
    """A topic; ``dedup_window_ms`` None keeps the default window."""
    settings = TopicSettings(buckets=buckets, lease_ms=LEASE)
    if dedup_window_ms is not None:
        settings = dataclasses.replace(settings, dedup_window_ms=dedup_window_ms)
    topic = Topic(name, settings, created_at_ms=42)
    await storage.create_topic(topic)
    return topic


async def given_messages(storage: Storage, *messages: NewMessage, topic: str = T) -> None:
    assert await storage.insert(topic, messages) == [ACCEPTED] * len(messages)


async def lease(
    storage: Storage,
    now: int = NOW,
    *,
    topic: str = T,
    limit: int = 100,
    owner: str = C1,
    buckets: Buckets = None,
    max_deliveries: int = 0,
    horizon_ms: int = 0,
    caps: dict[str, int] | None = None,
) -> Leases:
    request = LeaseRequest.of(
        topic, buckets, now, limit, LEASE, owner, max_deliveries, horizon_ms, caps
    )
    return await storage.lease(request)


def ids(leases: Leases) -> list[str]:
    return [d.id for d in leases.delivered]


async def given_leased(storage: Storage, *names: str, owner: str = C1) -> dict[str, int]:
    """Messages due at NOW, leased by ``owner``; their versions by id."""
    await given_topic(storage)
    await given_messages(storage, *(msg(n) for n in names))
    leases = await lease(storage, owner=owner)
    return {d.id: d.version for d in leases.delivered}


async def given_every_state(storage: Storage) -> None:
    """A topic with, at ``NOW + LEASE``, a message in every state: "dead",
    "leased" (held by C1 until ``NOW + 2 * LEASE``), "expired-lease" and "due"
    (both due), "waiting"."""
    await given_topic(storage)
    await given_messages(
        storage,
        msg("dead", NOW - 9, expires_at=1),
        msg("leased", NOW - 8),
        msg("expired-lease", NOW - 7),
        msg("due", NOW + LEASE // 2),
        msg("waiting", NOW + 10 * LEASE),
    )
    await lease(storage, NOW - 7, limit=2, owner=C1)  # dead-letters "dead", leases two
    await storage.extend(T, [("leased", 2)], C1, NOW + 2 * LEASE)


async def given_dead(storage: Storage, *names: str, died_at: int = NOW) -> None:
    await given_topic(storage)
    await given_messages(storage, *(msg(n, died_at, expires_at=1) for n in names))
    assert (await lease(storage, died_at)).dead_lettered == len(names)
