"""The broker's firers: one per cron timeline in storage, kept in step with them.

A timeline appears when a topic gets its first entry (here, or on another
broker: the cluster's topic-changed event says so) and goes with its topic.
``refresh`` reconciles with storage at start-up and every ``REFRESH_S``, as a
backstop for a missed event.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import TYPE_CHECKING

from dejaq.broker.cron import entries
from dejaq.broker.cron.firer import Firer
from dejaq.broker.cron.metrics import CronMetrics
from dejaq.broker.tasks import pause
from dejaq.core.errors import DejaqError, NotFound

if TYPE_CHECKING:
    from dejaq.broker.context import BrokerContext

log = logging.getLogger(__name__)
REFRESH_S = 10.0


class CronFirers:
    def __init__(self, broker: BrokerContext) -> None:
        self._broker = broker
        self._firers: dict[str, Firer] = {}  # by target topic
        self._lock = asyncio.Lock()
        # One consumer id per broker process: a restarted broker is a new consumer,
        # and the leases its predecessor held expire as any consumer's would.
        self.consumer_id = f"cron-{uuid.uuid4().hex[:12]}"
        self.metrics = CronMetrics(broker.metrics.registry, broker.metrics.kind_of)

    async def ensure(self, target: str) -> None:
        """Fire ``target``'s cron timeline on this broker, if it has one."""
        async with self._lock:
            firer = self._firers.get(target)
            if firer is not None and firer.running:
                return
            if firer is not None:
                await self._drop(target)
            broker = self._broker
            try:
                timeline = await broker.storage.get_topic(entries.companion(target))
            except NotFound:
                return
            firer = Firer(broker, timeline, self.consumer_id, self.metrics)
            self._firers[target] = firer
            broker.consumer_ids.add((timeline.name, self.consumer_id))
            firer.start(broker.dispatcher(timeline))
            self.metrics.touch(target)
            await broker.coordinator.consumer_joined(timeline.name, self.consumer_id)
            log.info("firing the cron entries of %s", target)

    async def forget(self, target: str) -> None:
        async with self._lock:
            await self._drop(target)

    async def _drop(self, target: str) -> None:
        firer = self._firers.pop(target, None)
        if firer is None:
            return
        await firer.stop()
        name = firer.timeline.name
        self._broker.consumer_ids.discard((name, self.consumer_id))
        await self._broker.drop_dispatcher(name, NotFound(f"topic {target!r} has no cron timeline"))
        self.metrics.forget(target)
        await self._broker.coordinator.consumer_left(name, self.consumer_id)

    async def refresh(self) -> None:
        """Fire every cron timeline storage has; stop those that are gone."""
        names = {t.name for t in await self._broker.storage.list_topics()}
        targets = {entries.target_of(n) for n in names} - {None}
        for target in sorted(t for t in targets if t):
            await self.ensure(target)
        for target in set(self._firers) - targets:
            await self.forget(target)

    async def run_forever(self, interval_s: float = REFRESH_S) -> None:
        while True:
            try:
                await self.refresh()
            except DejaqError as exc:
                log.warning("cron: could not list cron timelines: %s", exc)
            await pause(interval_s)

    async def stop(self) -> None:
        async with self._lock:
            for target in list(self._firers):
                await self._drop(target)
