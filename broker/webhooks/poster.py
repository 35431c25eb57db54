"""Posting a webhook topic's due messages: a consumer of the topic inside the broker.

Each broker attaches one ``Poster`` to every webhook topic, as a consumer that
joins and leaves like any other, so in a cluster the topic's buckets are
spread over the brokers and each message is posted by the broker owning its
bucket. The dispatcher leases each message and hands it over at its
millisecond (never before), through the same lease path as a gRPC consumer's;
the lease outlasts the request's timeout, so a broker that dies mid-request
leaves the message leased until the lease runs out, and another broker posts
it again: redelivered, never lost.

A 2xx answer acks the message (acks of one moment go to storage together). A
429, a 5xx, any other answer, a timeout or a connection error nacks it, due
again after ``retry.delay_ms``; past the topic's max deliveries the nack puts
it on the dead timeline. Requests in flight are bounded by the webhook's
``concurrency``: it is the session's credit.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

import aiohttp
from yarl import URL

from dejaq.broker.api.settle import Kind, settle
from dejaq.broker.webhooks import retry
from dejaq.broker.webhooks.metrics import WebhookMetrics
from dejaq.broker.webhooks.resolver import AllowedResolver, Refused
from dejaq.broker.webhooks.targets import Allowlist, literal_refused
from dejaq.core import signature
from dejaq.core.errors import DejaqError
from dejaq.core.model import LeasedMessage, Leases, Topic, Webhook

if TYPE_CHECKING:
    from dejaq.broker.context import BrokerContext
    from dejaq.broker.dispatch.dispatcher import Dispatcher

log = logging.getLogger(__name__)
# The lease outlasts a request by this much: a request that times out is
# nacked by its broker before another may lease the message.
LEASE_MARGIN_MS = 2_000


def header_id(mid: str) -> str:
    """A message id as a header value: percent-encoded UTF-8 (RFC 3986), so
    any id travels; ids of letters, digits and ``-._~:@/!$&'()*+,;=`` read as they are."""
    return quote(mid, safe="-._~:@/!$&'()*+,;=")


def lease_for(topic: Topic) -> int:
    hook = topic.settings.webhook
    timeout = hook.timeout_ms if hook is not None else 0
    return max(topic.settings.lease_ms, timeout + LEASE_MARGIN_MS)


@dataclass(frozen=True)
class _Plan:
    """What every request of a webhook shares, made once per setting."""

    url: URL
    headers: tuple[tuple[str, str], ...]
    timeout: aiohttp.ClientTimeout
    refused: bool  # a literal address the allowlist does not admit (now)

    @classmethod
    def of(cls, hook: Webhook, allow: Allowlist) -> _Plan:
        url = URL(hook.url)
        headers = {"Content-Type": "application/octet-stream", **dict(hook.headers)}
        return cls(
            url,
            tuple(headers.items()),
            aiohttp.ClientTimeout(total=hook.timeout_ms / 1000),
            literal_refused(url.host or "", allow),
        )


class Poster:
    """The broker's consumer of one webhook topic (a dispatcher ``Receiver``)."""

    def __init__(
        self,
        broker: BrokerContext,
        topic: Topic,
        consumer_id: str,
        allow: Allowlist,
        metrics: WebhookMetrics,
    ) -> None:
        assert topic.settings.webhook is not None
        self.consumer_id = consumer_id
        self.topic = topic
        self.hook: Webhook = topic.settings.webhook
        self._plan = _Plan.of(self.hook, allow)
        self.lease_ms = lease_for(topic)
        self.credit = self.hook.concurrency
        self.ahead_ms = 0  # posted at its millisecond
        self._broker = broker
        self._allow = allow
        self._metrics = metrics
        self._dispatcher: Dispatcher | None = None
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._acks: list[tuple[str, int]] = []
        self._flush: asyncio.Task[None] | None = None
        self._failed = False

    # -- Receiver ----------------------------------------------------------------

    def deliver(self, leases: Leases) -> None:
        for m in leases.delivered:
            task = asyncio.create_task(self._post(m))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def fail(self, exc: Exception) -> None:
        log.info("webhook topic %s closed: %s", self.topic.name, exc)
        self._failed = True

    # -- life --------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._dispatcher is not None and not self._failed

    def start(self, dispatcher: Dispatcher) -> None:
        connector = aiohttp.TCPConnector(limit=0, resolver=AllowedResolver(self._allow))
        self._session = aiohttp.ClientSession(connector=connector)
        self._dispatcher = dispatcher
        dispatcher.add(self)

    def retune(self, topic: Topic) -> None:
        """The topic's settings changed: later requests use its new webhook."""
        hook = topic.settings.webhook
        assert hook is not None
        self.credit += hook.concurrency - self.hook.concurrency
        self.topic, self.hook, self.lease_ms = topic, hook, lease_for(topic)
        self._plan = _Plan.of(hook, self._allow)
        if self._dispatcher is not None:
            self._dispatcher.poke()

    async def stop(self) -> None:
        """Stop posting. Messages held for us go back at their own time; those
        in flight stay leased until their lease runs out (posted again then)."""
        d, self._dispatcher = self._dispatcher, None
        if d is not None:
            await d.hand_back(self.consumer_id, d.remove(self))
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._flush is not None:
            await asyncio.gather(self._flush, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    # -- posting -----------------------------------------------------------------

    async def _post(self, m: LeasedMessage) -> None:
        hook, plan = self.hook, self._plan
        started = time.monotonic()
        try:
            status, retry_after = await self._request(hook, plan, m)
            self._metrics.observe(self.topic.name, status, time.monotonic() - started)
        finally:
            self.credit += 1
            if self._dispatcher is not None:
                self._dispatcher.poke()
        if status is not None and 200 <= status < 300:
            self._ack(m)
            return
        now = self._broker.clock.now_ms()
        delay = retry.delay_ms(hook.backoff_ms, m.deliveries, retry_after, now)
        await self._settle(Kind.NACK, [(m.id, m.version)], delay)

    async def _request(
        self, hook: Webhook, plan: _Plan, m: LeasedMessage
    ) -> tuple[int | None, str | None]:
        """The answer's status and ``Retry-After``; no status when none came."""
        assert self._session is not None
        headers = dict(plan.headers)
        headers["Dejaq-Id"] = header_id(m.id)
        headers["Dejaq-Timestamp-Ms"] = str(m.timestamp)
        headers["Dejaq-Delivery"] = str(m.deliveries)
        headers["Dejaq-Signature"] = signature.sign(hook.secret, int(time.time() * 1000), m.payload)
        try:
            if plan.refused:
                raise Refused(f"webhook target {hook.url!r} is not allowed")
            async with self._session.post(
                plan.url,
                data=m.payload,
                headers=headers,
                timeout=plan.timeout,
                allow_redirects=False,
            ) as resp:
                return resp.status, resp.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            log.warning(
                "webhook %s: message %r not delivered (%s)",
                self.topic.name,
                m.id,
                str(exc) or type(exc).__name__,
            )
            return None, None
        except Exception:  # a failure of ours: retried later like any failed attempt
            log.exception("webhook %s: message %r not delivered", self.topic.name, m.id)
            return None, None

    def _ack(self, m: LeasedMessage) -> None:
        """Acks of one moment go to storage in one call."""
        self._acks.append((m.id, m.version))
        if self._flush is None:
            self._flush = asyncio.create_task(self._flush_acks())

    async def _flush_acks(self) -> None:
        try:
            await asyncio.sleep(0)  # let the answers of this moment join
            while self._acks:
                items, self._acks = self._acks, []
                await self._settle(Kind.ACK, items, 0)
        finally:
            self._flush = None  # whatever happened, the next ack starts a flush

    async def _settle(self, kind: Kind, items: list[tuple[str, int]], ms: int) -> None:
        try:
            outcomes = await settle(self._broker, self.topic, kind, items, self.consumer_id, ms)
        except DejaqError as exc:  # the leases run out: posted again, not lost
            log.warning(
                "webhook %s: could not %s %d: %s", self.topic.name, kind.value, len(items), exc
            )
            return
        refused = [o for o in outcomes if isinstance(o, DejaqError)]
        if refused:  # our lease ran out and another broker took it: it posts it
            log.info(
                "webhook %s: %d %ss refused: %s",
                self.topic.name,
                len(refused),
                kind.value,
                refused[0],
            )
