"""Due deliveries published to a sink, a batch after another, up to the
sink's ``window`` of batches awaiting their confirms at once; each acked in
dejaq only once its batch was confirmed.

A batch that fails is published again once the sink is open again, with
every batch sent after it, in their order, each confirmed before the next:
a key's last copies reach the sink in due order (a batch after the failed
one may have been confirmed meanwhile: a duplicate, with its id).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from dejaq.bridges.endpoints import Outbound, Sink

D = TypeVar("D")  # a due delivery (the driver's)


@dataclass(frozen=True, slots=True)
class _Sent(Generic[D]):
    due: Sequence[D]
    out: Sequence[Outbound]
    confirmed: asyncio.Future[None]


class Publishing(Generic[D]):
    """``reopen()`` opens the sink again after a failure (False: stopped
    first); ``failed(exc)`` counts a failure; ``confirmed(due)`` acks a
    confirmed batch's deliveries in dejaq."""

    def __init__(
        self,
        sink: Sink,
        reopen: Callable[[], Awaitable[bool]],
        failed: Callable[[Exception], None],
        confirmed: Callable[[Sequence[D]], Awaitable[None]],
    ) -> None:
        self.sink = sink
        self._reopen = reopen
        self._failed = failed
        self._confirmed = confirmed
        self._sent: collections.deque[_Sent[D]] = collections.deque()

    @property
    def in_flight(self) -> int:
        """Batches sent and not settled yet."""
        return len(self._sent)

    async def publish(self, due: Sequence[D], out: Sequence[Outbound]) -> bool:
        """Send a batch after those before it; settle what is confirmed, and
        wait for the oldest while the window is full. False when stopped."""
        try:
            self._sent.append(_Sent(due, out, await self.sink.send(out)))
        except Exception as exc:  # down, or refusing: sent again, never dropped
            self._failed(exc)
            return await self._again([(due, out)])
        return await self.settle(keep=max(self.sink.window - 1, 0))

    async def settle(self, keep: int) -> bool:
        """Ack the confirmed batches, oldest first, waiting for the oldest
        while more than ``keep`` are in flight. False when stopped."""
        while self._sent and (len(self._sent) > keep or self._sent[0].confirmed.done()):
            oldest = self._sent[0]
            try:
                await oldest.confirmed
            except Exception as exc:
                self._failed(exc)
                return await self._again([])
            self._sent.popleft()
            await self._confirmed(oldest.due)
        return True

    async def _again(self, more: list[tuple[Sequence[D], Sequence[Outbound]]]) -> bool:
        """Every batch in flight, then ``more``, published again in order,
        each confirmed before the next, the sink reopened while it fails."""
        batches = [(sent.due, sent.out) for sent in self._sent] + more
        self.abandon()
        if not await self._reopen():
            return False
        for due, out in batches:
            while True:
                try:
                    await self.sink.publish(out)
                    break
                except Exception as exc:
                    self._failed(exc)
                    if not await self._reopen():
                        return False
            await self._confirmed(due)
        return True

    def abandon(self) -> None:
        """Forget the batches in flight: unacked in dejaq, they come again
        when their lease runs out."""
        for sent in self._sent:
            if sent.confirmed.done():
                if not sent.confirmed.cancelled():
                    sent.confirmed.exception()  # seen: its batch goes again
            else:
                sent.confirmed.cancel()
        self._sent.clear()
