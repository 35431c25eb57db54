"""The unary control calls: topics, messages by id, the dead timeline."""

from __future__ import annotations

import dataclasses

from dejaq.broker import validation
from dejaq.broker.context import BrokerContext
from dejaq.broker.cron import entries as cron_entries
from dejaq.broker.metrics import Event
from dejaq.broker.security.identity import lease_owner
from dejaq.broker.settle import Kind, settle
from dejaq.core.errors import DejaqError, InvalidArgument, NotFound
from dejaq.core.model import Settled, Topic
from dejaq.core.wire.convert import (
    counts_to_pb,
    message_to_pb,
    settings_from_pb,
    topic_to_pb,
)
from dejaq.proto import dejaq_pb2 as pb

MAX_DEAD_PAGE = 1000


async def create_topic(broker: BrokerContext, req: pb.CreateTopicRequest) -> pb.Topic:
    name = validation.topic_name(req.name)
    settings = validation.settings(settings_from_pb(req.settings), broker.config.max_produce_bytes)
    topic = Topic(name, settings, broker.clock.now_ms())
    await broker.storage.create_topic(topic)
    await broker.coordinator.topic_created(topic)  # other brokers drop cached copies
    return topic_to_pb(topic)


async def delete_topic(broker: BrokerContext, req: pb.DeleteTopicRequest) -> pb.DeleteTopicResponse:
    name = validation.topic_name(req.name)
    await broker.storage.delete_topic(name)
    broker.topics.forget(name)
    await broker.coordinator.topic_deleted(name)  # other brokers drop theirs, and dispatchers
    # Its consumers are told, and its dispatcher (holding the old settings) goes:
    # a topic created again under the name starts afresh.
    await broker.drop_dispatcher(name, NotFound(f"topic {name!r} was deleted"))
    broker.metrics.forget_topic(name)
    await _delete_cron_timeline(broker, name)
    return pb.DeleteTopicResponse()


async def _delete_cron_timeline(broker: BrokerContext, name: str) -> None:
    """A topic's cron entries go with it."""
    if broker.cron is not None:
        await broker.cron.forget(name)
    timeline = cron_entries.companion(name)
    try:
        await broker.storage.delete_topic(timeline)
    except NotFound:
        return
    await broker.coordinator.topic_deleted(timeline)


async def update_topic(broker: BrokerContext, req: pb.UpdateTopicRequest) -> pb.Topic:
    """Change what a running topic may change: its delivery rate cap."""
    name = validation.topic_name(req.name)
    if req.no_max_rate == req.HasField("max_rate"):
        raise InvalidArgument("say what to change: a max rate, or no max rate")
    rate = 0.0 if req.no_max_rate else validation.max_rate(req.max_rate)
    current = await broker.storage.get_topic(name)
    settings = dataclasses.replace(current.settings, max_rate=rate)
    topic = dataclasses.replace(current, settings=settings)
    await broker.storage.update_topic(topic)
    broker.topics.forget(name)
    d = broker.dispatchers.get(name)
    if d is not None and d.topic.created_at_ms == topic.created_at_ms:
        d.retune(topic)
    await broker.coordinator.topic_created(topic)  # other brokers read it again
    return topic_to_pb(topic)


async def list_topics(broker: BrokerContext, req: pb.ListTopicsRequest) -> pb.ListTopicsResponse:
    topics = await broker.storage.list_topics()
    return pb.ListTopicsResponse(
        topics=[topic_to_pb(t) for t in topics if cron_entries.target_of(t.name) is None]
    )


async def describe_topic(
    broker: BrokerContext, req: pb.DescribeTopicRequest
) -> pb.TopicDescription:
    topic = await broker.topics.get(req.name)
    counts = await broker.storage.counts(topic.name, broker.clock.now_ms())
    next_due = await broker.storage.next_due(topic.name, None)
    d = broker.dispatchers.get(topic.name)
    return pb.TopicDescription(
        topic=topic_to_pb(topic),
        counts=counts_to_pb(counts),
        consumers=len(d.receivers) if d else 0,
        next_due_ms=next_due or 0,
    )


async def get_message(broker: BrokerContext, req: pb.GetMessageRequest) -> pb.Message:
    topic = await broker.topics.get(req.topic)
    msg = await broker.storage.get(topic.name, validation.message_id(req.id))
    return message_to_pb(topic, msg, broker.clock.now_ms())


def _result(s: Settled) -> pb.MutationResult:
    return pb.MutationResult(id=s.id, version=s.version, timestamp_ms=s.timestamp)


async def move(broker: BrokerContext, req: pb.MoveRequest) -> pb.MutationResult:
    topic = await broker.topics.get(req.topic)
    at = validation.timestamp(req.timestamp_ms)
    s = await broker.storage.move(
        topic.name, validation.message_id(req.id), req.version, at, broker.clock.now_ms()
    )
    broker.hint(topic.name, at)
    broker.metrics.count(Event.MOVED, topic.name)
    return _result(s)


async def cancel(broker: BrokerContext, req: pb.CancelRequest) -> pb.MutationResult:
    topic = await broker.topics.get(req.topic)
    mid = validation.message_id(req.id)
    result = _result(
        await broker.storage.cancel(topic.name, mid, req.version, broker.clock.now_ms())
    )
    broker.metrics.count(Event.CANCELLED, topic.name)
    return result


async def ack(broker: BrokerContext, req: pb.AckRequest) -> pb.MutationResult:
    return await _settle_one(broker, Kind.ACK, req, 0)


async def extend(broker: BrokerContext, req: pb.ExtendRequest) -> pb.MutationResult:
    return await _settle_one(broker, Kind.EXTEND, req, req.lease_ms)


async def nack(broker: BrokerContext, req: pb.NackRequest) -> pb.MutationResult:
    return await _settle_one(broker, Kind.NACK, req, req.delay_ms)


async def _settle_one(
    broker: BrokerContext,
    kind: Kind,
    req: pb.AckRequest | pb.ExtendRequest | pb.NackRequest,
    ms: int,
) -> pb.MutationResult:
    topic = await broker.topics.get(req.topic)
    item = (validation.message_id(req.id), req.version)
    # The caller's own consumer: another principal's leases are not its to settle.
    owner = lease_owner(validation.consumer_id(req.consumer_id))
    (outcome,) = await settle(broker, topic, kind, [item], owner, ms)
    if isinstance(outcome, DejaqError):
        raise outcome
    return _result(outcome)


async def list_dead(broker: BrokerContext, req: pb.ListDeadRequest) -> pb.ListDeadResponse:
    topic = await broker.topics.get(req.topic)
    limit = min(req.limit or 100, MAX_DEAD_PAGE)
    msgs = await broker.storage.list_dead(topic.name, req.after_id, limit)
    now = broker.clock.now_ms()
    return pb.ListDeadResponse(messages=[message_to_pb(topic, m, now) for m in msgs])


async def redrive(broker: BrokerContext, req: pb.RedriveRequest) -> pb.RedriveResponse:
    topic = await broker.topics.get(req.topic)
    at = validation.timestamp(req.timestamp_ms) if req.timestamp_ms else broker.clock.now_ms()
    ids = [validation.message_id(i) for i in req.ids] or None
    count = await broker.storage.redrive(topic.name, ids, at)
    broker.hint(topic.name, at)
    return pb.RedriveResponse(redriven=count)
