"""Firing cron entries: a consumer of a topic's cron timeline inside the broker.

Each broker attaches one ``Firer`` to every cron timeline, as a consumer that
joins and leaves like any other, so in a cluster the timeline's buckets are
spread over the brokers and each entry is fired by one broker at a time. An
entry's message is leased when its next occurrence is ``LEAD_MS`` away; the
firer produces the occurrences due soon (ids ``ENTRY@EPOCH_MS``) on the topic
and puts the entry back, due at its next firing, by a nack at an absolute time.
On a priority topic an occurrence has the entry's priority and its time is a
not-before time: it waits until then and is ranked when due; one produced late
(a misfire) is ranked at once, as a produce with a past not-before time is.

A broker that dies while firing leaves the entry leased until
``FIRING_LEASE_MS``; another broker then fires it again and produces the same
ids, refused as duplicates. A batch of entries costs one insert per topic and
one nack per distinct next firing time, not calls per entry.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import TYPE_CHECKING

from dejaq.broker.cron import entries
from dejaq.broker.cron.metrics import CronMetrics
from dejaq.broker.cron.plan import Firing, plan
from dejaq.broker.dispatch import ranks
from dejaq.broker.observability.metrics import Event
from dejaq.core.buckets import bucket_of
from dejaq.core.cron import CronEntry, occurrence_id
from dejaq.core.errors import DejaqError
from dejaq.core.expiry import topic_expiry
from dejaq.core.model import InsertStatus, LeasedMessage, Leases, NewMessage, Topic

if TYPE_CHECKING:
    from dejaq.broker.context import BrokerContext
    from dejaq.broker.dispatch.dispatcher import Dispatcher

log = logging.getLogger(__name__)
CREDIT = 512  # entries being fired at once by one broker, per topic


class Firer:
    """The broker's consumer of one cron timeline (a dispatcher ``Receiver``)."""

    def __init__(
        self, broker: BrokerContext, timeline: Topic, consumer_id: str, metrics: CronMetrics
    ) -> None:
        self.consumer_id = consumer_id
        self.lease_ms = entries.FIRING_LEASE_MS
        self.credit = CREDIT
        self.ahead_ms = 0  # entries are sent to it at their millisecond
        self.lease_ahead_ms = 0  # the broker's look-ahead only
        self.answers_once = False
        self.timeline = timeline
        self.target = entries.target_of(timeline.name) or ""
        self._broker = broker
        self._metrics = metrics
        self._batches: asyncio.Queue[list[LeasedMessage] | None] = asyncio.Queue()
        self._dispatcher: Dispatcher | None = None
        self._task: asyncio.Task[None] | None = None

    # -- Receiver ----------------------------------------------------------------

    def deliver(self, leases: Leases) -> None:
        self._batches.put_nowait(list(leases.delivered))

    def fail(self, exc: Exception) -> None:
        log.info("cron timeline %s closed: %s", self.timeline.name, exc)
        self._batches.put_nowait(None)

    # -- life --------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        dispatcher.add(self)
        self._task = asyncio.create_task(self._run(), name=f"cron:{self.target}")

    async def stop(self) -> None:
        if self._dispatcher is not None:
            # Entries taken ahead for us and not yet fired go back at their own time.
            await self._dispatcher.hand_back(self.consumer_id, self._dispatcher.remove(self))
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while (batch := await self._batches.get()) is not None:
            try:
                await self.fire(batch)
            except DejaqError as exc:  # the leases expire: fired again, late, not lost
                log.warning("cron %s: could not fire %d entries: %s", self.target, len(batch), exc)
            self.credit += len(batch)
            if self._dispatcher is not None:
                self._dispatcher.poke()

    # -- firing ------------------------------------------------------------------

    async def fire(self, batch: list[LeasedMessage]) -> None:
        broker = self._broker
        now = broker.clock.now_ms()
        topic = await broker.topics.get(self.target)
        ranked = ranks.is_priority(topic)
        new: list[NewMessage] = []
        back: dict[int, list[tuple[str, int]]] = defaultdict(list)  # firing time -> entries
        for m in batch:
            entry, firing = self._plan(m, now)
            payload, prio = (entry.payload, entry.priority) if entry else (b"", 0)
            for at in firing.produce:
                oid = occurrence_id(m.id, at)
                bucket = bucket_of(oid, topic.settings.buckets)
                # On a priority topic the occurrence time is a not-before time.
                stored = ranks.stored_at(topic, prio, at, now) if ranked else at
                # The topic's expiry applies as to a produced message.
                expires = topic_expiry(topic.settings, max(at, now) if ranked else at)
                new.append(NewMessage(oid, stored, payload, bucket, 0, expires, prio))
            back[entries.fire_at(firing.next_ms)].append((m.id, m.version))
            if entry is not None:
                self._metrics.fired(self.target, entry.misfire.value, firing)
        if new:
            statuses = await broker.storage.insert(self.target, new)
            accepted = sum(1 for s in statuses if s is InsertStatus.ACCEPTED)
            broker.metrics.count(Event.PRODUCED, self.target, accepted)
            broker.metrics.count(Event.DUPLICATES, self.target, len(new) - accepted)
            broker.hint(self.target, min(n.timestamp for n in new))
        for at, items in back.items():
            outcomes = await broker.storage.nack(self.timeline.name, items, self.consumer_id, at, 0)
            lost = [o for o in outcomes if isinstance(o, DejaqError)]
            if lost:  # another broker took them after our lease ran out: it fires them
                log.info("cron %s: %d entries were taken over: %s", self.target, len(lost), lost[0])
            broker.hint(self.timeline.name, at)

    def _plan(self, m: LeasedMessage, now: int) -> tuple[CronEntry | None, Firing]:
        """The entry and what to produce; an unreadable or paused entry is parked."""
        try:
            entry = entries.decode(self.target, m.id, m.payload)
        except DejaqError:
            log.exception("cron %s: entry %r is unreadable; parked", self.target, m.id)
            return None, Firing()
        if entry.paused or m.timestamp >= entries.PARKED:
            return entry, Firing()
        return entry, plan(entry, m.timestamp + entries.LEAD_MS, now)
