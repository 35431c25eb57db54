"""A consumer session's outbox: the frames waiting for its stream, bounded.

The dispatcher and the settle reader put frames here; the stream takes them
out as fast as the consumer reads. Deliveries are bounded by the consumer's
credit window, but a consumer that stops reading while it keeps sending
settles or credits would grow the outbox without end: past ``max_frames``
waiting frames the consumer is cut off (RESOURCE_EXHAUSTED) and its unsent
deliveries go back to the timeline. The bytes of the delivery frames waiting
count against the broker-wide bound of held.py too, which cuts off the
consumer holding the most when all together hold too much.

An error put with ``fail`` is raised after the frames ahead of it; a cut-off
is raised at once.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Sequence

from dejaq.broker.dispatch.held import HeldBytes
from dejaq.core.errors import ResourceExhausted
from dejaq.core.model import LeasedMessage
from dejaq.proto import dejaq_pb2 as pb

_END = None  # a clean end of the stream
# A frame, the leased messages it carries (if a delivery), their lease end and
# the frame's bytes counted as held (a delivery's).
_Frame = tuple[pb.ConsumeResponse, Sequence[LeasedMessage], int, int]
_Item = _Frame | Exception | None
# Unsent deliveries go back only while their lease has this much left: one whose
# lease ran out may be another consumer's by now (and acked: gone), and handing
# it back would store it again.
HAND_BACK_MARGIN_MS = 1000


class Outbox:
    """Frames for one consumer stream, in order, at most ``max_frames`` waiting."""

    def __init__(self, consumer: str, max_frames: int, held: HeldBytes | None = None) -> None:
        self._consumer = consumer
        self.max_frames = max_frames
        self._items: deque[_Item] = deque()
        self._ready = asyncio.Event()
        self._frames = 0  # frames in _items (not errors or the end)
        self.held_bytes = 0  # of the delivery frames in _items
        self._held = held  # the broker's ledger; None once this outbox left it
        self.cut: ResourceExhausted | None = None
        # Told once when the consumer is cut off (the stream ends it at once).
        self.on_cut_off: Callable[[ResourceExhausted], None] | None = None

    @property
    def consumer(self) -> str:
        return self._consumer

    def put(
        self,
        frame: pb.ConsumeResponse,
        carries: Sequence[LeasedMessage] = (),
        lease_until: int = 0,
        size: int = 0,
    ) -> None:
        """Queue a frame (``carries``: the messages a delivery frame of ``size``
        bytes holds, leased until ``lease_until``)."""
        if self.cut is not None:
            return
        self._items.append((frame, carries, lease_until, size))
        self._frames += 1
        self._ready.set()
        if size:
            self.held_bytes += size
            if self._held is not None:
                self._held.add(self, size)  # which may cut this consumer off
        if self.cut is None and self._frames > self.max_frames:
            self.cut_off(
                ResourceExhausted(
                    f"consumer {self._consumer!r} is not reading its stream: over"
                    f" {self.max_frames} frames wait for it (--max-outbox-frames)"
                )
            )

    def fail(self, exc: Exception) -> None:
        """End the stream with ``exc`` after the frames already queued."""
        self._items.append(exc)
        self._ready.set()

    def end(self) -> None:
        """End the stream cleanly after the frames already queued."""
        self._items.append(_END)
        self._ready.set()

    async def get(self) -> pb.ConsumeResponse | None:
        """The next frame; None at a clean end; raises the error that ends it."""
        while True:
            if self.cut is not None:
                raise self.cut
            if self._items:
                item = self._items.popleft()
                if isinstance(item, tuple):
                    self._frames -= 1
                    self._release(item[3])
                    return item[0]
                if item is None:
                    return None
                raise item
            self._ready.clear()
            await self._ready.wait()

    def take_deliveries(self, now: int) -> list[LeasedMessage]:
        """Take the unsent delivery frames out: the messages they carry whose
        lease (to this consumer, which never saw them) still has
        ``HAND_BACK_MARGIN_MS`` left at ``now``; the others' leases just expire.
        The stream is ending: the outbox leaves the broker's ledger."""
        taken: list[LeasedMessage] = []
        kept: deque[_Item] = deque()
        for item in self._items:
            if isinstance(item, tuple) and item[1]:
                if item[2] > now + HAND_BACK_MARGIN_MS:
                    taken += item[1]
                self._frames -= 1
                self._release(item[3])
            else:
                kept.append(item)
        self._items = kept
        self._leave()
        return taken

    def cut_off(self, reason: ResourceExhausted) -> None:
        """End the stream at once with ``reason`` (told to ``on_cut_off``)."""
        if self.cut is not None:
            return
        self._leave()
        self.cut = reason
        self._ready.set()
        if self.on_cut_off is not None:
            self.on_cut_off(reason)

    def _release(self, size: int) -> None:
        if size:
            self.held_bytes -= size
            if self._held is not None:
                self._held.release(self, size)

    def _leave(self) -> None:
        if self._held is not None:
            self._held.leave(self)
            self._held = None
