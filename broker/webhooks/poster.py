"""Posting a webhook topic's due messages: a consumer of the topic inside the broker.

Each broker attaches one ``Poster`` to every webhook topic, as a consumer that
joins and leaves like any other, so in a cluster the topic's buckets are
spread over the brokers and each message is posted by the broker owning its
bucket. The dispatcher leases each message and hands it over at its
millisecond (never before), through the same lease path as a gRPC consumer's;
the lease outlasts the request, so a broker that dies mid-request
leaves the message leased until the lease runs out, and another broker posts
it again: redelivered, never lost.

A pass leases ``LEASE_AHEAD_MS`` of the topic's messages at once (one storage
call for many), and the dispatcher's window hands each over at its
millisecond. Requests in flight stay within the webhook's ``concurrency``; a
due message that finds them all busy waits here for the first to end. The
poster's credit, what the dispatcher may lease for it unsettled, is twice the
concurrency: as many again as can be in flight may be held or waiting, so one
waits at most one request timeout for a connection, and the lease covers that
wait and its own request.

A paused topic's dispatcher hands over nothing; what waits here for a
connection when the pause comes is handed back, due at its own time again.

A 2xx answer acks the message. A 429, a 5xx, any other answer, a timeout or
a connection error nacks it, due again after ``retry.delay_ms``; past the
topic's max deliveries the nack puts it on the dead timeline. The settles of
a few ms go to storage together, one call per kind and delay. Requests go out
over the keep-alive connections of ``pool.py``, each written whole in one
write (``request.py``); one timer per poster fails those past their timeout.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from yarl import URL

from dejaq.broker.api.settle import Kind, settle
from dejaq.broker.observability import tracing
from dejaq.broker.webhook_targets import Allowlist, literal_refused
from dejaq.broker.webhooks import retry
from dejaq.broker.webhooks.connection import Answer, Connection
from dejaq.broker.webhooks.metrics import WebhookMetrics
from dejaq.broker.webhooks.pool import Pool
from dejaq.broker.webhooks.request import RequestHead
from dejaq.broker.webhooks.resolver import AllowedResolver, Refused
from dejaq.core.errors import DejaqError
from dejaq.core.model import LeasedMessage, Leases, Topic, Webhook

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from dejaq.broker.context import BrokerContext
    from dejaq.broker.dispatch.dispatcher import Dispatcher

log = logging.getLogger(__name__)
# The lease outlasts a message's wait for a connection and its request by this
# much: a request that times out is nacked by its broker before another may
# lease the message.
LEASE_MARGIN_MS = 2_000
# How far ahead of their millisecond a pass leases a webhook's messages.
LEASE_AHEAD_MS = 10
# Answers settle in storage together, once per this many seconds.
SETTLE_EVERY_S = 0.005
# Requests in flight are checked against their timeout every tenth of it,
# within these bounds: one ends at most a tenth (or 0.25 s) after its time.
SWEEP_MIN_S = 0.01
SWEEP_MAX_S = 0.25


def lease_for(topic: Topic) -> int:
    """At least one timeout waiting for a connection plus one for the request."""
    hook = topic.settings.webhook
    timeout = hook.timeout_ms if hook is not None else 0
    return max(topic.settings.lease_ms, 2 * timeout + LEASE_MARGIN_MS)


def credit_for(hook: Webhook) -> int:
    """What the dispatcher may lease for a webhook unsettled: its requests in
    flight, and as many again held until due or waiting for a connection."""
    return 2 * hook.concurrency


@dataclass(frozen=True)
class _Plan:
    """What every request of a webhook shares, made once per setting."""

    origin: tuple[str, str, int]  # scheme, host, port: the pool its requests use
    head: RequestHead
    timeout_s: float
    sweep_s: float  # how often requests in flight are checked against the timeout
    refused: bool  # a literal address the allowlist does not admit (now)

    @classmethod
    def of(cls, hook: Webhook, allow: Allowlist) -> _Plan:
        url = URL(hook.url)
        host = url.raw_host or ""
        return cls(
            (url.scheme, host, url.port or 0),
            RequestHead(hook),
            hook.timeout_ms / 1000,
            min(max(hook.timeout_ms / 10_000, SWEEP_MIN_S), SWEEP_MAX_S),
            literal_refused(host, allow),
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
        self.credit = credit_for(self.hook)
        self.ahead_ms = 0  # posted at its millisecond
        self.lease_ahead_ms = LEASE_AHEAD_MS
        self.answers_once = False
        self._broker = broker
        self._allow = allow
        self._metrics = metrics
        self._dispatcher: Dispatcher | None = None
        self._resolver = AllowedResolver(allow)
        self._pools: dict[tuple[str, str, int], Pool] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._in_flight: set[Connection] = set()  # requests sent without a task
        self._sweep: asyncio.TimerHandle | None = None  # expires those past their timeout
        self._busy = 0  # requests in flight, dialling ones included
        self._waiting: deque[LeasedMessage] = deque()  # due, for a connection to end
        # Settles waiting for the flush: by kind and delay, one storage call each.
        self._settles: dict[tuple[Kind, int], list[tuple[str, int]]] = {}
        self._flush: asyncio.Task[None] | None = None
        self._failed = False
        self._spans: dict[str, tuple[Span, bytes]] = {}  # traced requests in flight, by id

    # -- Receiver ----------------------------------------------------------------

    def deliver(self, leases: Leases) -> None:
        self._waiting.extend(leases.delivered)
        self._start_waiting()

    def fail(self, exc: Exception) -> None:
        log.info("webhook topic %s closed: %s", self.topic.name, exc)
        self._failed = True

    # -- life --------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._dispatcher is not None and not self._failed

    def start(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        dispatcher.add(self)

    def retune(self, topic: Topic) -> None:
        """The topic's settings changed: later requests use its new webhook."""
        hook = topic.settings.webhook
        assert hook is not None
        self.credit += credit_for(hook) - credit_for(self.hook)
        self.topic, self.hook, self.lease_ms = topic, hook, lease_for(topic)
        self._plan = _Plan.of(hook, self._allow)
        for origin in [o for o in self._pools if o != self._plan.origin]:
            self._pools.pop(origin).close()  # its requests in flight fail: nacked, posted again
        self._start_waiting()  # paused: what waits is handed back instead
        if self._dispatcher is not None:
            self._dispatcher.poke()

    def _hand_back_waiting(self) -> None:
        """Paused: what waits for a connection is not posted but handed back,
        due at its own time again (requests already in flight finish)."""
        d, waiting = self._dispatcher, list(self._waiting)
        if d is None or not waiting:
            return
        self._waiting.clear()
        self.credit += len(waiting)
        task = asyncio.create_task(d.hand_back(self.consumer_id, waiting))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self) -> None:
        """Stop posting. Messages held or waiting for us go back at their own
        time; those in flight stay leased until their lease runs out (posted
        again then)."""
        d, self._dispatcher = self._dispatcher, None
        waiting = list(self._waiting)
        self._waiting.clear()
        if d is not None:
            await d.hand_back(self.consumer_id, d.remove(self) + waiting)
        for task in list(self._tasks):
            task.cancel()
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        for conn in list(self._in_flight):
            conn.abort()  # its answer is not read: the message stays leased
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._flush is not None:
            await asyncio.gather(self._flush, return_exceptions=True)
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()

    # -- posting -----------------------------------------------------------------

    def _start_waiting(self) -> None:
        """Post the waiting messages, oldest first, while the concurrency allows."""
        if self.topic.settings.paused:
            self._hand_back_waiting()
            return
        waiting, limit = self._waiting, self.hook.concurrency
        while waiting and self._busy < limit:
            m = waiting.popleft()
            self._busy += 1
            if not self._send(m):
                self._spawn(m)

    def _send(self, m: LeasedMessage) -> bool:
        """Post ``m`` at once on an idle connection, with no task: its answer
        comes to ``_answered``. False when no connection is idle."""
        plan = self._plan
        pool = self._pools.get(plan.origin)
        conn = pool.idle() if pool is not None and not plan.refused else None
        if pool is None or conn is None:
            return False
        started = time.monotonic()
        conn.deadline = started + plan.timeout_s
        self._in_flight.add(conn)
        conn.send(
            plan.head.request(m, int(time.time() * 1000), self._traced(m)),
            functools.partial(self._answered, m, self.hook, pool, conn, started),
        )
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(plan.sweep_s, self._expire)
        return True

    def _traced(self, m: LeasedMessage) -> bytes:
        """The trace header lines of ``m``'s request: its span's context while
        this request is traced (the span ends with its answer), else the
        message's own ``traceparent``. A request sent again on a new
        connection keeps its span."""
        traced = self._spans.get(m.id) if self._spans else None
        if traced is not None:
            return traced[1]
        span, lines = self._broker.tracing.webhook(
            self.topic.name, m.id, m.deliveries, m.headers, self.hook.url
        )
        if span is not None:
            self._spans[m.id] = (span, lines)
        return lines

    def _expire(self) -> None:
        """Fail the requests past their timeout (one timer for all: a timer a
        request costs more than the sweep). Checked every ``sweep_s``."""
        self._sweep = None
        now = time.monotonic()
        for conn in [c for c in self._in_flight if c.deadline <= now]:
            conn.expire()  # its answer comes to _answered as a TimeoutError
        if self._in_flight and self._sweep is None:  # (a request sent meanwhile set one)
            self._sweep = asyncio.get_running_loop().call_later(self._plan.sweep_s, self._expire)

    def _answered(
        self,
        m: LeasedMessage,
        hook: Webhook,
        pool: Pool,
        conn: Connection,
        started: float,
        outcome: Answer | Exception,
    ) -> None:
        self._in_flight.discard(conn)
        if self._dispatcher is None:  # stopped: the message stays leased, posted again later
            return
        if not isinstance(outcome, Exception):
            pool.done(conn)
            self._finish(m, hook, started, *outcome)
            return
        exc = outcome
        pool.drop(conn)
        if isinstance(exc, ConnectionError) and not conn.received:
            # The peer closed an idle connection as we wrote (its keep-alive ran
            # out): nothing was answered, so the request goes on a new connection.
            self._spawn(m)
            return
        self._failed_request(m, exc)
        self._finish(m, hook, started, None, None)

    def _spawn(self, m: LeasedMessage) -> None:
        task = asyncio.create_task(self._post(m))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _post(self, m: LeasedMessage) -> None:
        """Post ``m`` when a connection must be dialled first."""
        hook, plan = self.hook, self._plan
        started = time.monotonic()
        try:
            status, retry_after = await self._request(hook, plan, m)
        except BaseException:
            self.credit += 1
            self._busy -= 1
            raise
        self._finish(m, hook, started, status, retry_after)

    def _finish(
        self,
        m: LeasedMessage,
        hook: Webhook,
        started: float,
        status: int | None,
        retry_after: str | None,
    ) -> None:
        self._metrics.observe(self.topic.name, status, time.monotonic() - started)
        if self._spans:
            traced = self._spans.pop(m.id, None)
            if traced is not None:
                tracing.webhook_answered(traced[0], status)
        self.credit += 1
        self._busy -= 1
        self._start_waiting()
        # Passes run at their own pace while credit lasts; one that found none
        # waits for a poke: given once a quarter of the credit is back, so the
        # next pass leases a batch, not one message.
        if self.credit == max(1, credit_for(self.hook) // 4) and self._dispatcher is not None:
            self._dispatcher.poke()
        if status is not None and 200 <= status < 300:
            self._queue(Kind.ACK, 0, m)
            return
        now = self._broker.clock.now_ms()
        self._queue(Kind.NACK, retry.delay_ms(hook.backoff_ms, m.deliveries, retry_after, now), m)

    async def _request(
        self, hook: Webhook, plan: _Plan, m: LeasedMessage
    ) -> tuple[int | None, str | None]:
        """The answer's status and ``Retry-After``; no status when none came."""
        try:
            if plan.refused:
                raise Refused(f"webhook target {hook.url!r} is not allowed")
            pool = self._pools.get(plan.origin)
            if pool is None:
                pool = self._pools[plan.origin] = Pool(*plan.origin, self._resolver)
            async with asyncio.timeout(plan.timeout_s):
                request = plan.head.request(m, int(time.time() * 1000), self._traced(m))
                answer: Answer = await pool.post(request)
            return answer
        except Exception as exc:
            self._failed_request(m, exc)
            return None, None

    def _failed_request(self, m: LeasedMessage, exc: BaseException) -> None:
        if isinstance(exc, OSError):  # timeouts, ConnectionError, ssl errors, Refused
            log.warning(
                "webhook %s: message %r not delivered (%s)",
                self.topic.name,
                m.id,
                str(exc) or type(exc).__name__,
            )
        else:  # a failure of ours: retried later like any failed attempt
            log.error("webhook %s: message %r not delivered", self.topic.name, m.id, exc_info=exc)

    def _queue(self, kind: Kind, ms: int, m: LeasedMessage) -> None:
        """Settles of one moment go to storage together: one call per kind and delay."""
        self._settles.setdefault((kind, ms), []).append((m.id, m.version))
        if self._flush is None:
            self._flush = asyncio.create_task(self._flush_settles())

    async def _flush_settles(self) -> None:
        try:
            await asyncio.sleep(SETTLE_EVERY_S)  # let the answers of these ms join
            while self._settles:
                batches, self._settles = self._settles, {}
                for (kind, ms), items in batches.items():
                    await self._settle(kind, items, ms)
        finally:
            self._flush = None  # whatever happened, the next settle starts a flush

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
