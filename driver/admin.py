"""Admin calls: topics, messages by id, the dead timeline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dejaq.core import headers as header_codec
from dejaq.core.key_limits import KeyLimit
from dejaq.core.model import Counts, Message, Topic, TopicSettings, Webhook
from dejaq.core.wire.convert import (
    key_limit_from_pb,
    settings_to_pb,
    topic_from_pb,
    webhook_to_pb,
)
from dejaq.driver.client import Client
from dejaq.driver.key_info import KeyInfo, KeyLimitInfo, key_info, key_limit_info
from dejaq.proto import dejaq_pb2 as pb


@dataclass(frozen=True)
class TopicInfo:
    topic: Topic
    counts: Counts
    consumers: int
    next_due_ms: int | None


@dataclass(frozen=True)
class Forecast:
    """Waiting messages by due time: ``counts[i]`` are due in ``[start_ms + i *
    step_ms, start_ms + (i + 1) * step_ms)`` (leased messages not counted)."""

    start_ms: int
    step_ms: int
    counts: list[int]

    @property
    def bins(self) -> list[tuple[int, int]]:
        """(start of the bin in epoch ms, count) for each bin, earliest first."""
        return [(self.start_ms + i * self.step_ms, n) for i, n in enumerate(self.counts)]

    @property
    def total(self) -> int:
        return sum(self.counts)


@dataclass(frozen=True)
class MessageInfo:
    """A message as stored (its ``key``, and its ``headers`` encoded as storage
    keeps them) and its state."""

    message: Message
    state: str

    @property
    def key(self) -> str:
        return self.message.key

    @property
    def headers(self) -> dict[str, str]:
        """The message's headers (empty: none)."""
        return header_codec.decode(self.message.headers)


@dataclass(frozen=True)
class ScanPage:
    """One page of a bucket's messages, by id; ``after_id`` continues it (None: the end)."""

    messages: list[MessageInfo]
    after_id: str | None


@dataclass(frozen=True)
class Mutation:
    id: str
    version: int  # 0 when the message was deleted
    timestamp_ms: int


def _message(p: pb.Message) -> MessageInfo:
    m = Message(
        p.id,
        p.timestamp_ms,
        p.payload,
        p.version,
        p.deliveries,
        p.lease_owner or None,
        0,
        p.max_deliveries,
        p.expires_at_ms,
        p.state == "dead",
        p.priority,
        p.key,
        # protobuf keeps no order of a map: by name, one order every time
        header_codec.encode({name: p.headers[name] for name in sorted(p.headers)}),
    )
    return MessageInfo(m, p.state)


def _mutation(r: pb.MutationResult) -> Mutation:
    return Mutation(r.id, r.version, r.timestamp_ms)


class Admin:
    """Control calls over a ``Client``: topics (create, delete, list, describe),
    messages by id (get, move, cancel), the dead timeline (list, redrive) and
    the cluster status. Errors arrive as ``dejaq.core.errors`` classes.

    ``ack``, ``extend``, ``nack``, ``move`` and ``cancel`` quote a version and are
    not idempotent: they are never resent after reaching a broker. A broker lost
    mid-call raises ``BrokerUnavailable`` ("may or may not have been applied");
    ``get`` tells which (see ``dejaq.driver.client``)."""

    def __init__(self, client: Client) -> None:
        self.client = client

    async def create_topic(
        self, name: str, settings: TopicSettings | None = None, *, exist_ok: bool = False
    ) -> Topic:
        """Create a topic; ``AlreadyExists`` if one of that name exists. With
        ``exist_ok``, one that exists with these very settings is returned
        instead (a set-up that runs again), and one with other settings is
        still ``AlreadyExists``, its message naming each difference."""
        s = settings_to_pb(settings or TopicSettings(), secret=True)  # a secret given is kept
        req = pb.CreateTopicRequest(name=name, settings=s, exist_ok=exist_ok)
        return topic_from_pb(await self.client.call("CreateTopic", req))

    async def set_max_rate(self, name: str, rate: float | None) -> Topic:
        """Cap a topic's deliveries at ``rate`` a second across the cluster; None lifts
        the cap. A backlog then drains in due order at the cap."""
        req = (
            pb.UpdateTopicRequest(name=name, no_max_rate=True)
            if rate is None
            else pb.UpdateTopicRequest(name=name, max_rate=rate)
        )
        return topic_from_pb(await self.client.call("UpdateTopic", req))

    async def pause_topic(self, name: str) -> Topic:
        """Pause a topic, cluster-wide: produces are stored, nothing is delivered
        (leases already out may still be settled) until ``resume_topic``. It
        stays paused across broker restarts; pausing a paused topic does nothing."""
        return await self._paused(name, True)

    async def resume_topic(self, name: str) -> Topic:
        """Resume a paused topic: its backlog is delivered at once, in due order."""
        return await self._paused(name, False)

    async def _paused(self, name: str, paused: bool) -> Topic:
        req = pb.UpdateTopicRequest(name=name, paused=paused)
        return topic_from_pb(await self.client.call("UpdateTopic", req))

    async def set_delivery(
        self, name: str, lease_ms: int | None = None, max_deliveries: int | None = None
    ) -> Topic:
        """Change a topic's default lease (for consumers that connect from now
        on) and its max deliveries (0 = unlimited, 1 = at most once; judged at
        each delivery from now on); None leaves a setting as it is."""
        req = pb.UpdateTopicRequest(name=name)
        if lease_ms is not None:
            req.lease_ms = lease_ms
        if max_deliveries is not None:
            req.max_deliveries = max_deliveries
        return topic_from_pb(await self.client.call("UpdateTopic", req))

    async def set_key_limits(
        self,
        name: str,
        concurrency: int | None = None,
        rate: float | None = None,
        burst: int | None = None,
    ) -> Topic:
        """Limit every key of a topic (across the cluster; 0 lifts a limit): the
        messages of one key held at once, its deliveries a second and the burst
        it may make after a quiet time. None leaves a setting as it is; a key's
        own override (``set_key_limit``) wins over these."""
        req = pb.UpdateTopicRequest(name=name)
        if concurrency is not None:
            req.key_concurrency = concurrency
        if rate is not None:
            req.key_rate = rate
        if burst is not None:
            req.key_burst = burst
        return topic_from_pb(await self.client.call("UpdateTopic", req))

    async def set_key_limit(
        self,
        topic: str,
        key: str,
        concurrency: int | None = None,
        rate: float | None = None,
        burst: int | None = None,
    ) -> KeyLimitInfo:
        """Override a topic's limits for one key (merged into its override, if
        any; None: the topic's; 0: no limit). At most 10,000 keys a topic."""
        req = pb.SetKeyLimitRequest(
            topic=topic, key=key, concurrency=concurrency, rate=rate, burst=burst
        )
        return key_limit_info(await self.client.call("SetKeyLimit", req))

    async def key_limit(self, topic: str, key: str) -> KeyLimitInfo:
        """A key's limits as they apply, and its override."""
        req = pb.KeyLimitRequest(topic=topic, key=key)
        return key_limit_info(await self.client.call("GetKeyLimit", req))

    async def key_limits(self, topic: str, after: str = "", limit: int = 1000) -> list[KeyLimit]:
        """A topic's overrides in key order, a page after the key ``after``."""
        req = pb.ListKeyLimitsRequest(topic=topic, after=after, limit=limit)
        resp = await self.client.call("ListKeyLimits", req)
        return [key_limit_from_pb(o) for o in resp.limits]

    async def remove_key_limit(self, topic: str, key: str) -> None:
        """Drop a key's override: the topic's limits apply to it again
        (``NotFound`` when it has none)."""
        req = pb.KeyLimitRequest(topic=topic, key=key)
        await self.client.call("RemoveKeyLimit", req)

    async def busiest_keys(self, topic: str, limit: int = 10) -> list[KeyInfo]:
        """The keys with the most messages due now (up to ``limit``, at most
        1,000), most first, each with what it holds, how late it runs and its limits."""
        resp = await self.client.call("TopicKeys", pb.TopicKeysRequest(topic=topic, limit=limit))
        return [key_info(k) for k in resp.keys]

    async def set_webhook(
        self, name: str, webhook: Webhook | None, rotate_secret: bool = False
    ) -> Topic:
        """Replace a topic's webhook (None: stop webhook delivery). A webhook
        without a secret keeps the current one; ``rotate_secret`` has the broker
        make a new one. The answer's webhook carries the secret (admin only)."""
        req = pb.UpdateTopicRequest(name=name, rotate_secret=rotate_secret)
        if webhook is None:
            req.no_webhook = True
        else:
            req.webhook.CopyFrom(webhook_to_pb(webhook, secret=True))
        return topic_from_pb(await self.client.call("UpdateTopic", req))

    async def rotate_webhook_secret(self, name: str) -> Topic:
        """A new signing secret for the topic's webhook, made by the broker."""
        req = pb.UpdateTopicRequest(name=name, rotate_secret=True)
        return topic_from_pb(await self.client.call("UpdateTopic", req))

    async def webhook_secret(self, name: str) -> str:
        """The signing secret of a topic's webhook (an admin call); "" without one."""
        req = pb.UpdateTopicRequest(name=name, show_secret=True)
        topic = topic_from_pb(await self.client.call("UpdateTopic", req))
        return topic.settings.webhook.secret if topic.settings.webhook else ""

    async def delete_topic(self, name: str) -> None:
        await self.client.call("DeleteTopic", pb.DeleteTopicRequest(name=name))

    async def list_topics(self) -> list[Topic]:
        resp = await self.client.call("ListTopics", pb.ListTopicsRequest())
        return [topic_from_pb(t) for t in resp.topics]

    async def describe_topic(self, name: str) -> TopicInfo:
        d = await self.client.call("DescribeTopic", pb.DescribeTopicRequest(name=name))
        c = d.counts
        return TopicInfo(
            topic_from_pb(d.topic),
            Counts(c.waiting, c.due, c.leased, c.dead),
            d.consumers,
            d.next_due_ms or None,
        )

    async def forecast(
        self, topic: str, horizon_ms: int = 3_600_000, step_ms: int = 60_000
    ) -> Forecast:
        """How many waiting messages of ``topic`` fall due in each ``step_ms``
        from now up to ``horizon_ms`` (rounded up to whole steps; at most
        1,000 bins, else ``InvalidArgument``)."""
        req = pb.ForecastRequest(topic=topic, horizon_ms=horizon_ms, step_ms=step_ms)
        resp = await self.client.call("Forecast", req)
        return Forecast(resp.start_ms, resp.step_ms, list(resp.counts))

    async def get(self, topic: str, id: str) -> MessageInfo:
        return _message(
            await self.client.call("GetMessage", pb.GetMessageRequest(topic=topic, id=id))
        )

    async def move(
        self,
        topic: str,
        id: str,
        version: int,
        timestamp_ms: int,
        *,
        priority: int | None = None,
    ) -> Mutation:
        """Reschedule a message that is not leased. On a priority topic
        ``timestamp_ms`` is its not-before time (0 or past: available now) and
        ``priority`` a new priority (None keeps its own)."""
        req = pb.MoveRequest(topic=topic, id=id, version=version, timestamp_ms=timestamp_ms)
        if priority is not None:
            req.priority = priority
        return _mutation(await self.client.call("Move", req, idempotent=False))

    async def cancel(self, topic: str, id: str, version: int) -> Mutation:
        req = pb.CancelRequest(topic=topic, id=id, version=version)
        return _mutation(await self.client.call("Cancel", req, idempotent=False))

    async def ack(self, topic: str, id: str, version: int, consumer_id: str) -> Mutation:
        req = pb.AckRequest(topic=topic, id=id, version=version, consumer_id=consumer_id)
        return _mutation(await self.client.call("Ack", req, idempotent=False))

    async def extend(
        self, topic: str, id: str, version: int, consumer_id: str, lease_ms: int
    ) -> Mutation:
        req = pb.ExtendRequest(
            topic=topic, id=id, version=version, consumer_id=consumer_id, lease_ms=lease_ms
        )
        return _mutation(await self.client.call("Extend", req, idempotent=False))

    async def nack(
        self, topic: str, id: str, version: int, consumer_id: str, delay_ms: int = 0
    ) -> Mutation:
        req = pb.NackRequest(
            topic=topic, id=id, version=version, consumer_id=consumer_id, delay_ms=delay_ms
        )
        return _mutation(await self.client.call("Nack", req, idempotent=False))

    async def list_dead(
        self, topic: str, limit: int = 100, after_id: str = ""
    ) -> list[MessageInfo]:
        req = pb.ListDeadRequest(topic=topic, limit=limit, after_id=after_id)
        resp = await self.client.call("ListDead", req)
        return [_message(m) for m in resp.messages]

    async def scan_bucket(
        self,
        topic: str,
        bucket: int,
        after_id: str = "",
        limit: int = 1000,
        states: Sequence[str] = (),
        payloads: bool = True,
    ) -> ScanPage:
        """One page of ``bucket``'s messages (live and dead, of ``states`` when
        given) after ``after_id``; page on until ``after_id`` is None."""
        req = pb.ScanBucketRequest(
            topic=topic,
            bucket=bucket,
            after_id=after_id,
            limit=limit,
            states=list(states),
            without_payloads=not payloads,
        )
        resp = await self.client.call("ScanBucket", req)
        found = [_message(m) for m in resp.messages]
        return ScanPage(found, None if resp.done else resp.next_after_id)

    async def redrive(self, topic: str, ids: Sequence[str] = (), timestamp_ms: int = 0) -> int:
        req = pb.RedriveRequest(topic=topic, ids=list(ids), timestamp_ms=timestamp_ms)
        resp = await self.client.call("Redrive", req)
        return int(resp.redriven)
