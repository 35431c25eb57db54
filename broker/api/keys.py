"""The key calls: limits per key overridden for named keys, and a topic's busiest keys.

An override is stored with the topic's settings (``TopicSettings.key_limits``)
and reaches every broker as any topic change does (``control.topic_changed``).
Two overrides set at once through two brokers are each a read and a write of
the topic: the later write wins.
"""

from __future__ import annotations

import dataclasses

from dejaq.broker.api import control, validation
from dejaq.broker.context import BrokerContext
from dejaq.core import key_limits
from dejaq.core.errors import InvalidArgument, NotFound, WrongKind
from dejaq.core.key_limits import KeyLimit, resolve
from dejaq.core.keys import check_key
from dejaq.core.model import KIND_TIMELINE, Topic
from dejaq.core.wire.convert import key_limit_to_pb
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins.base import MAX_KEYS_LISTED

DEFAULT_LIST = 1000
DEFAULT_BUSIEST = 10


def _override(topic: Topic, key: str) -> KeyLimit | None:
    return next((o for o in topic.settings.key_limits if o.key == key), None)


def view(topic: Topic, key: str) -> pb.KeyLimitView:
    """A key's limits as they apply, and its override."""
    o = _override(topic, key)
    lim = resolve(topic.settings.key_defaults(), o)
    return pb.KeyLimitView(
        topic=topic.name,
        key=key,
        overridden=o is not None,
        override=None if o is None else key_limit_to_pb(o),
        concurrency=lim.concurrency,
        rate=lim.rate,
        burst=lim.burst,
    )


def _key(raw: str) -> str:
    if not raw:
        raise InvalidArgument("name a key (messages without one have no limits per key)")
    return check_key(raw)


async def _stored(broker: BrokerContext, name: str) -> Topic:
    topic = await broker.storage.get_topic(validation.topic_name(name))
    if topic.settings.kind != KIND_TIMELINE:
        raise WrongKind("limits per key are settings of timelines, not of a priority topic")
    return topic


async def _store(broker: BrokerContext, topic: Topic, limits: tuple[KeyLimit, ...]) -> Topic:
    changed = dataclasses.replace(
        topic, settings=dataclasses.replace(topic.settings, key_limits=limits)
    )
    await broker.storage.update_topic(changed)
    await control.topic_changed(broker, changed)
    return changed


async def set_limit(broker: BrokerContext, req: pb.SetKeyLimitRequest) -> pb.KeyLimitView:
    asked = KeyLimit(
        _key(req.key),
        req.concurrency if req.HasField("concurrency") else None,
        req.rate if req.HasField("rate") else None,
        req.burst if req.HasField("burst") else None,
    )
    topic = await _stored(broker, req.topic)
    limits = key_limits.with_override(topic.settings.key_limits, asked)
    topic = await _store(broker, topic, limits)
    return view(topic, asked.key)


async def get_limit(broker: BrokerContext, req: pb.KeyLimitRequest) -> pb.KeyLimitView:
    key = _key(req.key)
    return view(await broker.topics.get(req.topic), key)


async def remove_limit(broker: BrokerContext, req: pb.KeyLimitRequest) -> pb.RemoveKeyLimitResponse:
    key = _key(req.key)
    topic = await _stored(broker, req.topic)
    try:
        limits = key_limits.without_override(topic.settings.key_limits, key)
    except NotFound as exc:
        raise NotFound(f"topic {topic.name!r}: {exc}") from exc
    await _store(broker, topic, limits)
    return pb.RemoveKeyLimitResponse()


async def list_limits(
    broker: BrokerContext, req: pb.ListKeyLimitsRequest
) -> pb.ListKeyLimitsResponse:
    limit = req.limit or DEFAULT_LIST
    if limit > DEFAULT_LIST:
        raise InvalidArgument(f"list at most {DEFAULT_LIST} key overrides a page, not {limit}")
    topic = await broker.topics.get(req.topic)
    page = [o for o in topic.settings.key_limits if o.key > req.after][:limit]
    return pb.ListKeyLimitsResponse(limits=[key_limit_to_pb(o) for o in page])


async def busiest(broker: BrokerContext, req: pb.TopicKeysRequest) -> pb.TopicKeysResponse:
    """The busiest keys by due messages, with how late each runs and its limits."""
    limit = req.limit or DEFAULT_BUSIEST
    if limit > MAX_KEYS_LISTED:
        raise InvalidArgument(f"list at most {MAX_KEYS_LISTED} keys, not {limit}")
    topic = await broker.topics.get(req.topic)
    now = broker.clock.now_ms()
    loads = await broker.storage.keys(topic.name, now, limit)
    by_key = {o.key: o for o in topic.settings.key_limits}
    defaults = topic.settings.key_defaults()
    out = []
    for k in loads:
        lim = resolve(defaults, by_key.get(k.key))
        out.append(
            pb.KeyLoad(
                key=k.key,
                due=k.due,
                held=k.held,
                oldest_ms=k.oldest,
                lateness_ms=max(0, now - k.oldest) if k.due else 0,
                concurrency=lim.concurrency,
                rate=lim.rate,
                burst=lim.burst,
            )
        )
    return pb.TopicKeysResponse(now_ms=now, keys=out)
