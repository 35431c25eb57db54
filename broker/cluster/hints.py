"""Cross-broker hints: wake another broker's dispatcher for a message stored here.

A produce (or move, nack, redrive) on broker X may land in buckets that a
consumer on broker Y owns. Y's dispatcher sleeps until the next due timestamp
it knew of, or its re-scan interval; without a word from X the message could be
up to a re-scan late. So X writes the earliest such timestamp to
``hints/<topic>/<X>`` in etcd and every other broker watches that prefix and
calls ``dispatcher.hint(ts)``: a cost of one etcd write and one watch event
(a few milliseconds on a LAN).

To keep etcd writes far below the produce rate, a hint is only published when
it can matter:

- only for topics that have a consumer on another broker;
- only when due within the horizon (the re-scan interval plus a margin): a
  remote dispatcher re-reads storage before a later timestamp comes due;
- not when an earlier hint published for the topic is still in the future:
  a broker receiving a hint for time P re-reads storage at P (a timer, in
  ``events.py``) whatever its dispatcher had planned, and everything stored
  before P is due no earlier than P here, so that re-read finds it in time;
- coalesced per topic while a write is in flight: one write per topic at a
  time carries the minimum of everything offered meanwhile, and is written
  after all of them were stored.

Hints are best effort. One lost with an etcd outage costs at most a re-scan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from dejaq.broker.tasks import raise_if_cancelled

Publish = Callable[[str, int], Awaitable[None]]


class HintPublisher:
    """The hints this broker still has to write, one per topic, and the loop that
    writes them (through ``publish``, so it knows nothing of etcd)."""

    def __init__(self, horizon_ms: int) -> None:
        self.horizon_ms = horizon_ms
        self._pending: dict[str, int] = {}
        self._published: dict[str, int] = {}
        self._ready = asyncio.Event()

    def offer(self, topic: str, timestamp: int, now: int) -> bool:
        """Offer a hint for a message of ``topic`` due at ``timestamp``: True when a
        queued hint covers it (this one, or an earlier one already queued), False
        when it cannot help and was dropped."""
        if timestamp > now + self.horizon_ms:
            return False
        last = self._published.get(topic)
        if last is not None and last > now and timestamp >= last:
            return False
        pending = self._pending.get(topic)
        if pending is None or timestamp < pending:
            self._pending[topic] = timestamp
            self._ready.set()
        return True

    def forget(self, topic: str) -> None:
        """The topic was deleted: drop its queued and published hints."""
        self._pending.pop(topic, None)
        self._published.pop(topic, None)

    def reset(self) -> None:
        """A new etcd session: what was published under the old one may be lost."""
        self._pending.clear()
        self._published.clear()

    async def run(self, publish: Publish) -> None:
        """Publish queued hints until cancelled; a failed write ends the loop."""
        while True:
            raise_if_cancelled()  # the last write may have swallowed a cancel
            await self._ready.wait()
            self._ready.clear()
            batch, self._pending = self._pending, {}
            for topic, timestamp in batch.items():
                await publish(topic, timestamp)
                self._published[topic] = timestamp
