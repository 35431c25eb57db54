"""The unary control calls: topics, messages by id, the dead timeline."""

from __future__ import annotations

import dataclasses

from dejaq.broker.api import existing_topic, validation, webhook_settings
from dejaq.broker.api.settle import Kind, settle
from dejaq.broker.context import BrokerContext
from dejaq.broker.cron import entries as cron_entries
from dejaq.broker.dispatch import pausing, ranks
from dejaq.broker.observability.activity import Activity
from dejaq.broker.observability.metrics import Event
from dejaq.broker.security.identity import lease_owner
from dejaq.core import key_limits, priority, signature
from dejaq.core.errors import AlreadyExists, DejaqError, InvalidArgument, NotFound, WrongKind
from dejaq.core.model import KIND_TIMELINE, Settled, Topic, TopicSettings, Webhook
from dejaq.core.wire.convert import (
    counts_to_pb,
    message_to_pb,
    settings_from_pb,
    topic_to_pb,
    webhook_from_pb,
)
from dejaq.proto import dejaq_pb2 as pb

MAX_DEAD_PAGE = 1000


async def create_topic(broker: BrokerContext, req: pb.CreateTopicRequest) -> pb.Topic:
    """Create a topic; with ``exist_ok``, one that exists with the settings
    asked is the answer (``existing_topic.py``)."""
    name = validation.topic_name(req.name)
    asked = validation.settings(settings_from_pb(req.settings), broker.config.max_produce_bytes)
    settings = asked
    if asked.webhook is not None:
        hook = await _checked_webhook(broker, asked.webhook, asked.kind)
        asked = dataclasses.replace(asked, webhook=hook)
        settings = dataclasses.replace(asked, webhook=webhook_settings.with_secret(hook))
    now = broker.clock.now_ms()
    # Created paused or not; when is the broker's to say.
    settings = dataclasses.replace(
        settings, paused_at_ms=now if settings.paused else 0, resumed_at_ms=0
    )
    topic = Topic(name, settings, now)
    try:
        await broker.storage.create_topic(topic)
    except AlreadyExists:
        if not req.exist_ok:
            raise
        return topic_to_pb(await _same_topic(broker, name, asked), secret=True)
    await broker.coordinator.topic_created(topic)  # other brokers drop cached copies
    if broker.webhooks is not None:
        await broker.webhooks.changed(name)
    return topic_to_pb(topic, secret=True)  # an admin call: the secret is shown


async def _same_topic(broker: BrokerContext, name: str, asked: TopicSettings) -> Topic:
    """The existing topic ``name`` when its settings are those ``asked``, else
    ``SettingsDiffer`` naming each difference."""
    current = await broker.storage.get_topic(name)
    found = existing_topic.differences(current.settings, asked)
    if found:
        raise existing_topic.SettingsDiffer(name, found)
    return current


async def _checked_webhook(
    broker: BrokerContext, hook: Webhook, kind: str = KIND_TIMELINE
) -> Webhook:
    if kind != KIND_TIMELINE:
        raise WrongKind(
            f"webhooks post timelines, each message at its time: a {kind} topic cannot have one"
        )
    webhook_settings.webhook(hook)
    if broker.webhooks is not None:
        await webhook_settings.allowed(hook, broker.webhooks.allow)
    return hook


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
    if broker.webhooks is not None:
        await broker.webhooks.changed(name)
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
    """Change what a running topic may change: its delivery rate cap, default
    lease, max deliveries, webhook, and whether it is paused. The answer carries
    the webhook's signing secret (an admin call)."""
    name = validation.topic_name(req.name)
    rate_given = req.no_max_rate or req.HasField("max_rate")
    if req.no_max_rate and req.HasField("max_rate"):
        raise InvalidArgument("say what to change: a max rate, or no max rate (not both)")
    hook_given = req.HasField("webhook") or req.no_webhook or req.rotate_secret
    lease_given, md_given = req.HasField("lease_ms"), req.HasField("max_deliveries")
    pause_given = req.HasField("paused")
    keys_given = any(req.HasField(f) for f in _KEY_LIMITS)
    changes = rate_given or hook_given or lease_given or md_given or pause_given or keys_given
    asked = changes or req.show_secret or any(req.HasField(f) for f in _FIXED)
    if not asked:
        raise InvalidArgument(
            "say what to change: a max rate, or no max rate, a lease, max deliveries,"
            " a webhook, paused, or a limit per key"
        )
    rate = 0.0 if req.no_max_rate or not rate_given else validation.max_rate(req.max_rate)
    lease = validation.lease_ms(req.lease_ms) if lease_given else 0
    current = await broker.storage.get_topic(name)
    hook = await _new_webhook(broker, req, current) if req.HasField("webhook") else None
    _fixed_settings(current, req)
    if not changes:
        return topic_to_pb(current, secret=True)  # the fixed settings as they are
    settings = current.settings
    if rate_given:
        settings = dataclasses.replace(settings, max_rate=rate)
    if lease_given:
        settings = dataclasses.replace(settings, lease_ms=lease)
    if md_given:
        settings = dataclasses.replace(settings, max_deliveries=req.max_deliveries)
    if hook_given:
        settings = dataclasses.replace(settings, webhook=_webhook_of(current, req, hook))
    if pause_given:
        settings = pausing.paused(settings, req.paused, broker.clock.now_ms())
    if keys_given:
        settings = _key_limits(settings, req)
    topic = dataclasses.replace(current, settings=settings)
    await broker.storage.update_topic(topic)
    await topic_changed(broker, topic)
    return topic_to_pb(topic, secret=True)


_KEY_LIMITS = ("key_concurrency", "key_rate", "key_burst")


def _key_limits(settings: TopicSettings, req: pb.UpdateTopicRequest) -> TopicSettings:
    """The topic's limits per key after an update (each checked)."""
    if settings.kind != KIND_TIMELINE:
        raise WrongKind("limits per key are settings of timelines, not of a priority topic")
    s = settings
    if req.HasField("key_concurrency"):
        s = dataclasses.replace(s, key_concurrency=key_limits.concurrency(req.key_concurrency))
    if req.HasField("key_rate"):
        s = dataclasses.replace(s, key_rate=key_limits.rate(req.key_rate))
    if req.HasField("key_burst"):
        s = dataclasses.replace(s, key_burst=key_limits.burst(req.key_burst))
    return s


async def topic_changed(broker: BrokerContext, topic: Topic) -> None:
    """A topic's settings were stored changed: this broker's cache, metrics and
    dispatcher take them, and every other broker reads them again."""
    name = topic.name
    broker.topics.forget(name)
    broker.metrics.topic_known(topic)  # paused or not, for its gauge
    d = broker.dispatchers.get(name)
    if d is not None and d.topic.created_at_ms == topic.created_at_ms:
        d.retune(topic)
    await broker.coordinator.topic_created(topic)  # other brokers read it again
    if broker.webhooks is not None:
        await broker.webhooks.changed(name)


async def _new_webhook(
    broker: BrokerContext, req: pb.UpdateTopicRequest, current: Topic
) -> Webhook | None:
    """The webhook a set asks for (checked); None for one with an empty URL (off)."""
    if req.no_webhook:
        raise InvalidArgument("say what to change: a webhook, or no webhook (not both)")
    if not req.webhook.url:
        return None
    return await _checked_webhook(broker, webhook_from_pb(req.webhook), current.settings.kind)


def _webhook_of(current: Topic, req: pb.UpdateTopicRequest, hook: Webhook | None) -> Webhook | None:
    """The topic's webhook after a set: the one given (keeping the current
    secret unless it gives one), none, or the current one with a new secret."""
    old = current.settings.webhook
    if req.no_webhook or (req.HasField("webhook") and hook is None):
        if req.rotate_secret:
            raise InvalidArgument("a topic without a webhook has no secret to rotate")
        return None
    if hook is None:
        hook = old
    if hook is None:
        raise InvalidArgument(f"topic {current.name!r} has no webhook: give one (a URL)")
    if req.rotate_secret:
        return dataclasses.replace(hook, secret=signature.new_secret())
    return webhook_settings.with_secret(hook, old.secret if old is not None else "")


_FIXED = ("kind", "priorities", "aging_ms")


def _fixed_settings(topic: Topic, req: pb.UpdateTopicRequest) -> None:
    """Refuse to change what a topic keeps for life: its kind, priorities, aging
    (ranks already stored depend on them)."""
    s = topic.settings
    for field, current in zip(_FIXED, (s.kind, s.priorities, s.aging_ms), strict=True):
        if req.HasField(field) and getattr(req, field) != current:
            raise WrongKind(
                f"topic {topic.name!r}: its {field} ({current!r}) is fixed when it is created;"
                " create a new topic to change it"
            )


async def list_topics(broker: BrokerContext, req: pb.ListTopicsRequest) -> pb.ListTopicsResponse:
    topics = cron_entries.users_topics(await broker.storage.list_topics())
    names = [t.name for t in topics]
    return pb.ListTopicsResponse(
        topics=[topic_to_pb(t) for t in topics],
        activity=[_activity(n, a) for n, a in zip(names, broker.activity.of(names), strict=True)],
    )


def _activity(topic: str, a: Activity) -> pb.TopicActivity:
    return pb.TopicActivity(
        topic=topic,
        delivery_rate=a.delivery_rate,
        lateness_p99_ms=a.lateness_p99_ms,
        over_ms=a.over_ms,
    )


async def describe_topic(
    broker: BrokerContext, req: pb.DescribeTopicRequest
) -> pb.TopicDescription:
    topic = await broker.topics.get(req.name)
    counts = await broker.storage.counts(topic.name, broker.clock.now_ms())
    next_due = await broker.storage.next_due(topic.name, None)
    d = broker.dispatchers.get(topic.name)
    if next_due is not None and priority.is_ranked(next_due):
        next_due = broker.clock.now_ms()  # an available message: due now (never show a rank)
    [activity] = broker.activity.of([topic.name])
    return pb.TopicDescription(
        topic=topic_to_pb(topic),
        counts=counts_to_pb(counts),
        consumers=len(d.receivers) if d else 0,
        next_due_ms=next_due or 0,
        activity=_activity(topic.name, activity),
    )


async def get_message(broker: BrokerContext, req: pb.GetMessageRequest) -> pb.Message:
    topic = await broker.topics.get(req.topic)
    msg = await broker.storage.get(topic.name, validation.message_id(req.id))
    return message_to_pb(topic, msg, broker.clock.now_ms())


def _result(s: Settled) -> pb.MutationResult:
    return pb.MutationResult(id=s.id, version=s.version, timestamp_ms=s.timestamp)


async def move(broker: BrokerContext, req: pb.MoveRequest) -> pb.MutationResult:
    """Reschedule a message; of a priority topic, ``timestamp_ms`` is its new
    not-before time (past: available now) and ``priority`` an optional new one."""
    topic = await broker.topics.get(req.topic)
    at = validation.timestamp(req.timestamp_ms)
    mid = validation.message_id(req.id)
    new_priority = None
    if req.HasField("priority"):
        checked = priority.check_priority(topic, req.priority)
        new_priority = checked if ranks.is_priority(topic) else None
    now = broker.clock.now_ms()
    stored, shown = at, at
    if ranks.is_priority(topic):
        shown = max(at, now)
        # Without a new priority its own is not known here: stored at ``now``,
        # the next pass ranks it at its priority (promote), as a nack does.
        stored = shown if new_priority is None else ranks.stored_at(topic, new_priority, at, now)
    s = await broker.storage.move(topic.name, mid, req.version, stored, now, priority=new_priority)
    broker.hint(topic.name, stored)
    broker.metrics.count(Event.MOVED, topic.name)
    return pb.MutationResult(id=s.id, version=s.version, timestamp_ms=shown)


async def cancel(broker: BrokerContext, req: pb.CancelRequest) -> pb.MutationResult:
    topic = await broker.topics.get(req.topic)
    mid = validation.message_id(req.id)
    now = broker.clock.now_ms()
    # A priority topic's message may sit at its rank: its priority turns that
    # into the time it became available (the version quoted pins both).
    prio = (await broker.storage.get(topic.name, mid)).priority if ranks.is_priority(topic) else 0
    s = await broker.storage.cancel(topic.name, mid, req.version, now)
    if priority.is_ranked(s.timestamp) and ranks.is_priority(topic):
        s = s._replace(timestamp=priority.available_at(topic, prio, s.timestamp))
    broker.metrics.count(Event.CANCELLED, topic.name)
    return _result(s)


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
