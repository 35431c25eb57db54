"""The dispatcher: one per (topic, broker), pushing due messages to local consumers.

It never polls on a fixed tick. After a lease pass that found nothing due it asks
storage for the next due timestamp of its buckets and sleeps exactly until then;
after one that delivered it looks again at the next millisecond (under steady
load that is one storage round trip a pass instead of two). A produce that lands
earlier (``hint``), new credit (``poke``) or a consumer joining wakes it sooner.
A bounded re-scan interval only catches what no hint announced (another
broker's produce, a clock jump).

Fairness: each pass walks the consumers that have credit, starting one further
along each time (round-robin), and leases to each at most its credit. A slow
consumer is never sent more than its window; an idle one is served on every pass.
Storage decides what is due (``timestamp <= now``), so nothing is ever early.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable
from typing import Protocol

import numpy as np

from dejaq.broker.metrics import Event, Metrics
from dejaq.core.buckets import Buckets
from dejaq.core.clock import Clock, WallClock
from dejaq.core.errors import NotFound, StorageError
from dejaq.core.model import Leases, Topic
from dejaq.storage_plugins.base import LeaseRequest, Storage

log = logging.getLogger(__name__)


class _Pass(enum.Enum):
    MORE = "more"  # every consumer's batch filled up: more may be due
    DRAINED = "drained"  # everything due now was leased, nothing was due
    DRAINED_SOME = "drained some"  # everything due now was leased, and something was
    NO_CREDIT = "no credit"
    NO_BUCKETS = "no buckets"  # our consumers own no bucket (cluster): wait for a rebalance


STORAGE_RETRY_S = 0.5
_AWAKE = 1 << 62
_DEAF = -1


class Receiver(Protocol):
    """What the dispatcher needs of a consumer session."""

    consumer_id: str
    lease_ms: int
    credit: int

    def deliver(self, leases: Leases) -> None: ...
    def fail(self, exc: Exception) -> None: ...


class Dispatcher:
    def __init__(
        self,
        topic: Topic,
        storage: Storage,
        buckets: Callable[[], Buckets],
        max_frame: int,
        rescan_ms: int,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.topic = topic
        self._storage = storage
        self._buckets = buckets
        self._max_frame = max_frame
        self._rescan_ms = rescan_ms
        self._metrics = metrics
        self._clock: Clock = clock or WallClock()
        self._receivers: list[Receiver] = []
        self._turn = 0
        self._wake = asyncio.Event()
        # The timestamp the dispatcher sleeps until: a hint earlier than it wakes
        # the dispatcher. _AWAKE during a pass (any hint makes it look again),
        # _DEAF while no consumer has credit (only new credit helps).
        self._sleeping_until = _AWAKE
        self._task: asyncio.Task[None] | None = None
        self._last_pass_ms = 0  # the "now" of the latest lease pass

    @property
    def receivers(self) -> list[Receiver]:
        return list(self._receivers)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"dispatch:{self.topic.name}")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def add(self, receiver: Receiver) -> None:
        self._receivers.append(receiver)
        self.poke()

    def remove(self, receiver: Receiver) -> None:
        with contextlib.suppress(ValueError):
            self._receivers.remove(receiver)

    def poke(self) -> None:
        """Look again now (new credit, a new consumer)."""
        self._wake.set()

    def hint(self, timestamp: int) -> None:
        """A message due at ``timestamp`` was stored: wake if that is sooner than planned."""
        if timestamp < self._sleeping_until:
            self._wake.set()

    async def _run(self) -> None:
        while True:
            try:
                outcome = await self._pass()
                if outcome is _Pass.MORE:
                    await asyncio.sleep(0)  # let acks and produces in between passes
                elif outcome is _Pass.NO_CREDIT or outcome is _Pass.NO_BUCKETS:
                    await self._idle()
                elif outcome is _Pass.DRAINED_SOME:
                    # Under steady load the next millisecond is due too: look then,
                    # without asking storage first (one round trip a pass, not two).
                    # A pass that finds nothing asks next_due, as below.
                    await self._sleep(self._last_pass_ms + 1)
                else:
                    due = await self._storage.next_due(self.topic.name, self._buckets())
                    await self._sleep(due)
            except asyncio.CancelledError:
                raise
            except NotFound as exc:  # the topic was deleted under us
                log.info("topic %s is gone; closing its consumers", self.topic.name)
                for r in self.receivers:
                    r.fail(exc)
                return
            except StorageError as exc:
                log.warning("dispatch %s: storage error, retrying: %s", self.topic.name, exc)
                await asyncio.sleep(STORAGE_RETRY_S)
            except Exception:
                log.exception("dispatch %s: unexpected error, retrying", self.topic.name)
                await asyncio.sleep(STORAGE_RETRY_S)

    async def _pass(self) -> _Pass:
        """Lease due messages to the consumers that have credit."""
        self._sleeping_until = _AWAKE
        self._wake.clear()
        ready = [r for r in self._rotated() if r.credit > 0]
        if not ready:
            return _Pass.NO_CREDIT
        now = self._last_pass_ms = self._clock.now_ms()
        buckets = self._buckets()
        if buckets is not None and not buckets:
            return _Pass.NO_BUCKETS  # no storage call: a rebalance pokes us
        delivered = 0
        for r in ready:
            if r not in self._receivers:
                continue  # left while we awaited storage
            limit = min(r.credit, self._max_frame)
            leases = await self._storage.lease(
                LeaseRequest.of(
                    self.topic.name,
                    buckets,
                    now,
                    limit,
                    r.lease_ms,
                    r.consumer_id,
                    self.topic.settings.max_deliveries,
                )
            )
            if leases.delivered:
                r.credit -= len(leases.delivered)
                delivered += len(leases.delivered)
                r.deliver(leases)
            if self._metrics is not None:
                self._observe(now, leases)
            if len(leases.delivered) < limit:
                return _Pass.DRAINED_SOME if delivered or leases.dead_lettered else _Pass.DRAINED
        return _Pass.MORE

    def _observe(self, now: int, leases: Leases) -> None:
        assert self._metrics is not None
        name = self.topic.name
        delivered = leases.delivered
        due = np.fromiter((d.timestamp for d in delivered), np.int64, len(delivered))
        again = sum(1 for d in delivered if d.deliveries > 1)
        self._metrics.delivered(name, self._clock.now_ms(), due, again)
        self._metrics.count(Event.DEAD_LETTERED, name, leases.dead_lettered)

    def _rotated(self) -> list[Receiver]:
        rs = self._receivers
        if not rs:
            return []
        self._turn = (self._turn + 1) % len(rs)
        return rs[self._turn :] + rs[: self._turn]

    async def _idle(self) -> None:
        """No consumer has credit (or no bucket): hints cannot help, only new credit,
        a consumer or a rebalance (each pokes)."""
        self._sleeping_until = _DEAF
        if not self._wake.is_set():
            await self._wake.wait()

    async def _sleep(self, next_due: int | None) -> None:
        """Sleep until ``next_due`` (or the re-scan interval) unless woken."""
        now = self._clock.now_ms()
        horizon = now + self._rescan_ms
        until = horizon if next_due is None else min(next_due, horizon)
        self._sleeping_until = until
        if self._wake.is_set() or until <= now:
            return
        await self._clock.wait_until(until, self._wake)
