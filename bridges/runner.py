"""One bridge at work: source -> dejaq, and dejaq -> sink, each end reconnected
with back-off on ``EndpointDown``.

Into dejaq: a batch read at the source is produced by id (a duplicate id counts
as accepted: it is the retry of a hand-over a crash cut short); a message the
rule cannot read, or that dejaq refuses for good, goes to the topic's dead
timeline (or the error sink) with its reason; only then is the batch acked at
the source. A crash before that ack reads the batch again, and the ids absorb it.

Out of dejaq: due deliveries, a batch at a time in due order, are published
to the sink (up to its ``window`` of batches awaiting their confirms at once,
``publishing``); each is acked in dejaq only once the sink confirmed it. A
crash in between publishes it again when its lease runs out: a duplicate with
its id.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Sequence

from dejaq.bridges import registry, rules
from dejaq.bridges.config import BridgeSpec
from dejaq.bridges.endpoints import EndpointDown, Inbound, Outbound, Sink, Source
from dejaq.bridges.metrics import BridgeMetrics
from dejaq.bridges.publishing import Publishing
from dejaq.core.backoff import Backoff
from dejaq.core.clock import now_ms
from dejaq.core.errors import DejaqError, InvalidArgument
from dejaq.core.model import InsertStatus
from dejaq.core.redact import redact
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.delivery import Delivery
from dejaq.driver.producer import Outgoing, Producer

log = logging.getLogger("dejaq.bridges")

RETRY = Backoff(0.05, 5.0)  # seconds, after an end or dejaq failed
DEFAULT_BATCH = 1000
READ_WAIT_MS = 100  # a read waits this long for a first message: how soon a stop is seen
SETTLE_MS = 5  # how soon confirms of batches in flight are acked when no more are due
IN_FLIGHT = 4  # batches handed to dejaq at once
WATCH_S = 1.0  # the source's lag and the topic's held messages are read this often
# What dejaq answers for a message it holds: a duplicate id is the retry of a
# hand-over a crash cut short.
TAKEN = frozenset({InsertStatus.ACCEPTED, InsertStatus.DUPLICATE})


class Bridge:
    def __init__(
        self,
        spec: BridgeSpec,
        client: Client,
        metrics: BridgeMetrics | None = None,
        *,
        batch: int = DEFAULT_BATCH,
    ) -> None:
        self.spec = spec
        self.name = spec.name
        self.client = client
        self.metrics = metrics or BridgeMetrics()
        self.batch = batch
        self.source: Source = registry.source(spec.source.url, spec.source.options)
        self.sink: Sink | None = (
            registry.sink(spec.sink.url, spec.sink.options) if spec.sink else None
        )
        self.error_sink: Sink | None = (
            registry.sink(spec.error_sink.url, spec.error_sink.options, "error_sink")
            if spec.error_sink
            else None
        )
        self._error_sink_open = False
        self.producer = Producer(client, spec.topic)

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Bridge until ``stop`` is set (or the task is cancelled)."""
        stop = stop or asyncio.Event()
        work = [self._inbound(stop), self._watch(stop)]
        if self.sink is not None:
            work.append(self._outbound(stop))
        try:
            await asyncio.gather(*work)
        finally:
            await self.close()

    async def close(self) -> None:
        await self.producer.close()
        for end in (self.source, self.sink, self.error_sink):
            if end is not None:
                with contextlib.suppress(EndpointDown):
                    await end.close()

    # -- source -> dejaq ----------------------------------------------------

    async def _inbound(self, stop: asyncio.Event) -> None:
        failures = 0
        while not stop.is_set():
            handing: set[asyncio.Task[None]] = set()
            try:
                await self.source.open()
                while not stop.is_set():
                    taken = await self.source.read(self.batch, READ_WAIT_MS)
                    if taken:
                        # The next batch is read while this one is handed over.
                        handing.add(asyncio.create_task(self.take(taken)))
                    if len(handing) >= IN_FLIGHT or (handing and not taken):
                        done, handing = await asyncio.wait(
                            handing, return_when=asyncio.FIRST_COMPLETED
                        )
                        for task in done:
                            task.result()
                    failures = 0
                await _finish(handing)
            except Exception as exc:  # down, or refusing: nothing acked is lost
                end = "dejaq" if isinstance(exc, DejaqError) else "source"
                self._failed(end, exc)
                await _abandon(handing)  # not acked: read again from the group
                with contextlib.suppress(EndpointDown):
                    await self.source.close()
                await _pause(stop, RETRY.delay(failures))
                failures += 1
            except BaseException:  # cancelled
                await _abandon(handing)
                raise

    async def take(self, taken: Sequence[Inbound]) -> None:
        """Hand ``taken`` to dejaq (the unreadable ones to the dead timeline or
        the error sink), then ack them at the source."""
        now = now_ms()
        # Columns, not an Outgoing a message: the bridge's CPU a message is
        # what bounds its rate.
        good, bad = rules.columns(self.spec.rules, taken, now)
        if good:
            try:
                results = await self.producer.send_columns(
                    good.timestamps,
                    good.payloads,
                    good.ids,
                    priorities=good.priorities,
                    keys=good.keys,
                    headers=good.headers,
                )
                sent = good.messages
            except InvalidArgument:
                # The producer refused the batch for one message's headers: found
                # and set apart, the rest go.
                ready: list[tuple[Inbound, Outgoing]] = []
                for i, message in enumerate(good.messages):
                    out = good.outgoing(i)
                    try:
                        rules.check(out)
                        ready.append((message, out))
                    except rules.Unreadable as exc:
                        bad.append((message, str(exc)))
                results = await self.producer.send_batch([out for _, out in ready])
                sent = [message for message, _ in ready]
            for message, result in zip(sent, results, strict=True):
                if result.status not in TAKEN:
                    bad.append((message, f"refused by dejaq: {result.error or result.status.name}"))
        if bad:
            await self._unreadable(bad, now)
        await self.source.ack(taken)
        self.metrics.accepted.labels(self.name).inc(len(taken) - len(bad))

    async def _unreadable(self, bad: Sequence[tuple[Inbound, str]], now: int) -> None:
        for message, reason in bad:
            log.warning("bridge %s: %s: %s", self.name, message.source_id, reason)
        self.metrics.unreadable.labels(self.name).inc(len(bad))
        dead = [rules.dead(message, reason, now) for message, reason in bad]
        if self.error_sink is not None:
            await self._to_error_sink(dead)
            return
        for out, result in zip(dead, await self.producer.send_batch(dead), strict=True):
            if result.status not in TAKEN:
                # Not even the dead timeline takes it: said loudly, never silently.
                log.error(
                    "bridge %s: %s could not be dead-lettered: %s",
                    self.name,
                    out.id,
                    result.error,
                )

    async def _to_error_sink(self, dead: Sequence[Outgoing]) -> None:
        sink = self.error_sink
        assert sink is not None
        if not self._error_sink_open:
            await sink.open()
            self._error_sink_open = True
        try:
            await sink.publish(
                [Outbound(d.payload, {**(d.headers or {}), "id": d.id}) for d in dead]
            )
        except EndpointDown:
            self._error_sink_open = False
            raise

    # -- dejaq -> sink --------------------------------------------------------

    async def _outbound(self, stop: asyncio.Event) -> None:
        sink = self.sink
        assert sink is not None
        failures = 0
        while not stop.is_set():
            consumer = Consumer(
                self.client,
                self.spec.topic,
                consumer_id=f"bridge-{self.name}",
                # The topic's lease: a sink down longer than it, or a bridge
                # killed, publishes the message again (with its id).
                lease_ms=0,
                credits=max(self.batch * 4, 2048),
                retry_timeout_s=math.inf,
            )
            publishing: Publishing[Delivery] = Publishing(
                sink,
                lambda: self._reopen(sink, stop, after_failure=True),
                lambda exc: self._failed("sink", exc),
                self._published,
            )
            try:
                await consumer.start()
                if not await self._reopen(sink, stop):
                    return
                while not stop.is_set():
                    # Batches in flight: their confirms are looked at this often.
                    wait_ms = SETTLE_MS if publishing.in_flight else READ_WAIT_MS
                    try:
                        first = await consumer.receive(timeout_s=wait_ms / 1000)
                    except TimeoutError:
                        if not await publishing.settle(keep=sink.window):
                            return
                        continue
                    if first is None:
                        return
                    due = [first, *consumer.ready()]
                    due.sort(key=lambda d: d.timestamp_ms)  # stable: a key's order stays
                    if not await self._publish(publishing, due):
                        return
                    failures = 0
                if not await publishing.settle(keep=0):
                    return
            except DejaqError as exc:  # the topic went, say: its consumer starts again
                self._failed("dejaq", exc)
                await _pause(stop, RETRY.delay(failures))
                failures += 1
            finally:
                publishing.abandon()  # stopped: the leases run out, the messages come again
                with contextlib.suppress(DejaqError, TimeoutError):
                    await consumer.close()

    async def _publish(self, publishing: Publishing[Delivery], due: list[Delivery]) -> bool:
        """Send ``due`` a batch at a time; False when stopped."""
        for start in range(0, len(due), self.batch):
            part = due[start : start + self.batch]
            out = [
                Outbound(d.payload, {**d.headers, "id": d.id, "due_ms": str(d.timestamp_ms)})
                for d in part
            ]
            if not await publishing.publish(part, out):
                return False
        return True

    async def _published(self, part: Sequence[Delivery]) -> None:
        """The sink confirmed ``part``: acked in dejaq."""
        confirmed = now_ms()
        self.metrics.lateness.observe_many(
            self.name, [max(confirmed - d.timestamp_ms, 0) / 1000 for d in part]
        )
        for d in part:
            await d.ack()
        self.metrics.published.labels(self.name).inc(len(part))

    async def _reopen(
        self, sink: Sink, stop: asyncio.Event, *, after_failure: bool = False
    ) -> bool:
        """Open ``sink`` (backing off while it is down); False when stopped first."""
        failures = 0
        while not stop.is_set():
            if after_failure or failures:
                await _pause(stop, RETRY.delay(failures))
            try:
                with contextlib.suppress(EndpointDown):
                    await sink.close()
                await sink.open()
                return True
            except EndpointDown as exc:
                self._failed("sink", exc)
                failures += 1
        return False

    # -- watching -------------------------------------------------------------

    async def _watch(self, stop: asyncio.Event) -> None:
        admin = Admin(self.client)
        while not stop.is_set():
            try:
                lag = await self.source.lag()
                if lag is not None:
                    self.metrics.source_lag.labels(self.name).set(lag)
            except (EndpointDown, Exception) as exc:  # a lag unread now is read next time
                log.debug("bridge %s: lag: %s", self.name, exc)
            try:
                counts = (await admin.describe_topic(self.spec.topic)).counts
                self.metrics.held.labels(self.name).set(counts.waiting + counts.due + counts.leased)
            except DejaqError as exc:
                log.debug("bridge %s: held: %s", self.name, exc)
            await _pause(stop, WATCH_S)

    def _failed(self, end: str, exc: BaseException) -> None:
        self.metrics.errors.labels(self.name, end).inc()
        log.warning("bridge %s: %s: %s; trying again", self.name, end, redact(str(exc)))


async def _finish(tasks: set[asyncio.Task[None]]) -> None:
    """Wait for ``tasks``; the first failure raised."""
    for task in tasks:
        await task


async def _abandon(tasks: set[asyncio.Task[None]]) -> None:
    """Cancel ``tasks`` and wait for them, whatever they raise."""
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds``, or less when ``stop`` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def run_all(
    specs: Sequence[BridgeSpec],
    client: Client,
    metrics: BridgeMetrics | None = None,
    stop: asyncio.Event | None = None,
) -> None:
    """Run every bridge of ``specs`` until ``stop`` is set."""
    metrics = metrics or BridgeMetrics()
    stop = stop or asyncio.Event()
    await asyncio.gather(*(Bridge(spec, client, metrics).run(stop) for spec in specs))
