"""What the pair tests of the NATS and RabbitMQ ends share: a bridge running
in-process against an embedded broker, and the checks of what the sink got.

Due order within a key is dejaq's promise for the messages it holds together:
a message the source hands over after a later-due one of its key was already
published cannot come before it. On an idle machine the lead before the first
due covers the hand-over of all of them; on a busy one it may not, so the
topic stays paused until the bridge has taken every message (``hold``): a
message due meanwhile leaves late, never early, and never out of order.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

from dejaq.bridges import config
from dejaq.bridges.metrics import BridgeMetrics, figures
from dejaq.bridges.runner import Bridge
from dejaq.core.model import TopicSettings
from dejaq.driver import Admin, embedded
from tests.bridges.support import TOPIC, Published

COUNT = 50_000
SPREAD_MS = 20_000
LEAD_MS = 3_000  # before the first due: time for the bridge to take them all
# The kill tests' lease: longer than a batch's publish on a busy machine, or its
# deliveries run out and come again while the sink is confirming them.
LEASE_MS = 10_000


@dataclass
class Running:
    """A bridge at work, and when (epoch ms) it had taken ``expected`` messages."""

    name: str
    metrics: BridgeMetrics
    admin: Admin
    taken_all_ms: int | None = None
    expected: int = 0
    watch: asyncio.Task[None] | None = field(default=None, repr=False)

    def figure(self, name: str) -> int:
        return figures(self.metrics.registry.collect()).get(self.name, {}).get(name, 0)

    async def _watch(self) -> None:
        while True:
            if self.figure("accepted") >= self.expected:
                self.taken_all_ms = int(time.time() * 1000)
                await self.admin.resume_topic(TOPIC)
                return
            await asyncio.sleep(0.02)  # polling a counter; stopped with the bridge

    async def hold(self, count: int) -> None:
        """Hold the topic's deliveries until the bridge has taken ``count`` messages."""
        await self.admin.pause_topic(TOPIC)
        self.expected = count
        self.watch = asyncio.create_task(self._watch())


@contextlib.asynccontextmanager
async def running_bridge(
    text: str, settings: TopicSettings | None = None, hold: int = 0
) -> AsyncIterator[Running]:
    """The one bridge of bridges file ``text``, run until the block ends; with
    ``hold``, its topic delivers nothing until the bridge has taken that many."""
    (spec,) = config.parse(text)
    async with embedded("memory://") as client:
        admin = Admin(client)
        await admin.create_topic(TOPIC, settings)
        running = Running(spec.name, BridgeMetrics(), admin)
        if hold:
            await running.hold(hold)
        stop = asyncio.Event()
        task = asyncio.create_task(Bridge(spec, client, running.metrics).run(stop))
        try:
            yield running
        finally:
            stop.set()
            await task
            if running.watch is not None:
                running.watch.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running.watch


def early(out: Sequence[Published]) -> list[Published]:
    return [p for p in out if p.at_ms < p.due_ms]


def out_of_due_order(out: Sequence[Published]) -> list[tuple[Published, Published]]:
    """Neighbours, within a key in the sink's order, whose dues go backwards."""
    by_key: dict[str, list[Published]] = defaultdict(list)
    for p in out:
        by_key[p.user].append(p)
    return [
        (a, b)
        for seen in by_key.values()
        for a, b in itertools.pairwise(seen)
        if b.due_ms < a.due_ms
    ]


def report(bridge: Running, out: Sequence[Published]) -> None:
    """Print (pytest -s) when the bridge had taken every message, against the
    first due, and the publish lateness: figures, not checks."""
    first_due = min(p.due_ms for p in out)
    late = sorted(p.at_ms - p.due_ms for p in out)
    taken = "never" if bridge.taken_all_ms is None else f"{bridge.taken_all_ms - first_due:+d} ms"
    print(
        f"{bridge.name}: all taken at {taken} from the first due;"
        f" lateness p50 {late[len(late) // 2]} ms, p99 {late[int(len(late) * 0.99)]} ms"
    )
