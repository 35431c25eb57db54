"""The cron calls: add, update (pause and resume too), get, list, delete."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

from dejaq.broker.context import BrokerContext
from dejaq.broker.cron import checks, entries
from dejaq.broker.cron.plan import first_next, upcoming
from dejaq.core.buckets import bucket_of
from dejaq.core.cron import CronEntry
from dejaq.core.errors import AlreadyExists, Leased, NotFound, StaleVersion
from dejaq.core.model import InsertStatus, NewMessage, Topic
from dejaq.core.wire.convert import cron_from_pb, cron_to_pb, misfire_from_pb
from dejaq.proto import dejaq_pb2 as pb

T = TypeVar("T")
MAX_LIST = 1000
MAX_UPCOMING = 100
RETRIES = 50  # an entry being fired is leased for a few ms: try again
RETRY_S = 0.02


async def add(broker: BrokerContext, req: pb.CronEntry) -> pb.CronEntry:
    topic = await broker.topics.get(req.topic)
    entry = checks.entry(replace(cron_from_pb(req), topic=topic.name), topic)
    next_ms = 0 if entry.paused else first_next(entry, broker.clock.now_ms())
    name = await _companion(broker, topic)
    at = entries.fire_at(next_ms)
    bucket = bucket_of(entry.id, entries.SETTINGS.buckets)
    new = NewMessage(entry.id, at, entries.encode(entry), bucket)
    (status,) = await broker.storage.insert(name, [new])
    if status is not InsertStatus.ACCEPTED:
        raise AlreadyExists(f"cron entry {entry.id!r} already exists in topic {topic.name!r}")
    broker.hint(name, at)
    return cron_to_pb(replace(entry, version=1, next_ms=next_ms))


async def update(broker: BrokerContext, req: pb.CronUpdateRequest) -> pb.CronEntry:
    topic = await broker.topics.get(req.topic)
    checks.entry_id(req.id)

    async def once() -> CronEntry:
        current = await _get(broker, topic, req.id, req.version)
        changed = checks.entry(_changed(current, req), topic)
        now = broker.clock.now_ms()
        # Occurrences before the current cursor were produced already: they stay.
        next_ms = 0 if changed.paused else first_next(changed, max(now, current.next_ms))
        at = entries.fire_at(next_ms)
        settled = await broker.storage.move(
            entries.companion(topic.name),
            req.id,
            current.version,
            at,
            now,
            entries.encode(changed),
        )
        broker.hint(entries.companion(topic.name), at)
        return replace(changed, version=settled.version, next_ms=next_ms)

    return cron_to_pb(await _retrying(once, quoted=req.version))


async def get(broker: BrokerContext, req: pb.CronGetRequest) -> pb.CronInfo:
    topic = await broker.topics.get(req.topic)
    entry = await _get(broker, topic, checks.entry_id(req.id), 0)
    times = upcoming(entry, entry.next_ms, min(req.upcoming, MAX_UPCOMING))
    return pb.CronInfo(entry=cron_to_pb(entry), upcoming_ms=times)


async def list_(broker: BrokerContext, req: pb.CronListRequest) -> pb.CronListResponse:
    topic = await broker.topics.get(req.topic)
    limit = min(req.limit or 100, MAX_LIST)
    name = entries.companion(topic.name)
    found = []
    try:
        for bucket in range(entries.SETTINGS.buckets):
            page = await broker.storage.scan(name, bucket, req.after_id, limit)
            found += page.messages
    except NotFound:
        return pb.CronListResponse()  # no entry was ever added
    found.sort(key=lambda m: m.id)
    return pb.CronListResponse(
        entries=[cron_to_pb(entries.from_message(topic.name, m)) for m in found[:limit]]
    )


async def delete(broker: BrokerContext, req: pb.CronDeleteRequest) -> pb.CronDeleteResponse:
    topic = await broker.topics.get(req.topic)
    checks.entry_id(req.id)

    async def once() -> None:
        current = await _get(broker, topic, req.id, req.version)
        now = broker.clock.now_ms()
        await broker.storage.cancel(entries.companion(topic.name), req.id, current.version, now)

    await _retrying(once, quoted=req.version)
    return pb.CronDeleteResponse()


async def _companion(broker: BrokerContext, topic: Topic) -> str:
    """The topic's cron timeline, created with its first entry (and fired here)."""
    name = entries.companion(topic.name)
    companion = Topic(name, entries.SETTINGS, broker.clock.now_ms())
    try:
        await broker.storage.create_topic(companion)
        await broker.coordinator.topic_created(companion)  # other brokers start firing it
    except AlreadyExists:
        pass
    if broker.cron is not None:
        await broker.cron.ensure(topic.name)
    return name


async def _get(broker: BrokerContext, topic: Topic, id: str, version: int) -> CronEntry:
    try:
        message = await broker.storage.get(entries.companion(topic.name), id)
    except NotFound:
        raise NotFound(f"cron entry {id!r} not found in topic {topic.name!r}") from None
    entry = entries.from_message(topic.name, message)
    if version and version != entry.version:
        raise StaleVersion(f"cron entry {id!r} is at version {entry.version}, not {version}")
    return entry


async def _retrying(once: Callable[[], Awaitable[T]], quoted: int) -> T:
    """Run ``once``; while the entry is being fired (leased for a moment, its
    version moving on), run it again, unless the caller quoted a version."""
    for _ in range(RETRIES - 1):
        try:
            return await once()
        except Leased:
            pass
        except StaleVersion:
            if quoted:
                raise
        await asyncio.sleep(RETRY_S)
    return await once()


def _changed(e: CronEntry, req: pb.CronUpdateRequest) -> CronEntry:
    out = e
    for name in ("schedule", "timezone", "payload", "start_ms", "end_ms", "paused", "priority"):
        if req.HasField(name):  # type: ignore[arg-type]
            out = replace(out, **{name: getattr(req, name)})
    if req.HasField("misfire"):
        out = replace(out, misfire=misfire_from_pb(req.misfire))
    if req.HasField("misfire_limit"):
        out = replace(out, misfire_limit=req.misfire_limit)
    if out.timezone == "":
        out = replace(out, timezone="UTC")
    return out
