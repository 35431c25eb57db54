"""Deliveries the broker sent before they were due, held until they are.

A consumer that says so (``Hello.hold_ms``) is sent messages up to that many ms
before their timestamp, so a broker busy for a few ms makes none late. The
consumer must then release each no earlier than the broker would have sent it:
when the broker's clock (the one that decides "due") reaches its timestamp.

Each frame carries the broker's clock when it was made (``sent_at``, epoch ms).
It is read after it was made, so ``sent_at - mono`` (``mono``: this process's
monotonic clock in ms at reading) is a lower bound of the broker's clock minus
ours, and a message released once ``mono + bound >= timestamp`` is never early
by the broker's clock, whatever this machine's wall clock says. The largest
bound seen lately is the best (the frame that travelled fastest); it is
trusted for ``FRESH_MS`` only, so the two clocks' rates, which may differ by up
to ``DRIFT`` (NTP slewing), cannot add up to a millisecond; ``MARGIN_MS`` covers
what they may drift within it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from bisect import bisect_right
from collections.abc import Callable, Sequence
from itertools import pairwise

from dejaq.driver.delivery import Delivery

FRESH_MS = 250.0  # how long the best clock bound is trusted
DRIFT = 1e-3  # two clocks' rates differ by at most this much (NTP slews by <= 500 ppm each)
MARGIN_MS = FRESH_MS * DRIFT


class _Frame:
    """One frame's held deliveries, in due order, with their timestamps."""

    __slots__ = ("at", "deliveries", "sent")

    def __init__(self, deliveries: Sequence[Delivery], at: Sequence[int]) -> None:
        self.deliveries = deliveries
        self.at = at  # their timestamps (broker clock), ascending
        self.sent = 0  # deliveries[:sent] are released

    def take(self, broker_now: float) -> Sequence[Delivery]:
        """Release what is due by ``broker_now`` (a lower bound of the broker's clock)."""
        end = bisect_right(self.at, broker_now, self.sent)
        out = self.deliveries[self.sent : end]
        self.sent = end
        return out


class Hold:
    """Held deliveries; ``release`` is called with those that have become due
    (on the running loop's timer), in due order."""

    def __init__(self, release: Callable[[Sequence[Delivery]], None]) -> None:
        self._release = release
        self._bound = float("-inf")  # broker clock - our monotonic clock, at least
        self._bound_at = float("-inf")  # when (monotonic ms) it was measured
        self._frames: list[tuple[int, int, _Frame]] = []  # by next timestamp
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        # The loop the frames came on, kept: asking for the running loop costs a
        # system call (getpid) each time, and the timer runs a thousand times a second.
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def holding(self) -> bool:
        """Whether any delivery is held."""
        return bool(self._frames)

    def __len__(self) -> int:
        return sum(len(f.deliveries) - f.sent for _, _, f in self._frames)

    def add(self, deliveries: Sequence[Delivery], timestamps: Sequence[int], sent_at: int) -> None:
        """A frame made at ``sent_at`` (broker clock): release each delivery when
        it is due, the due ones at once."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        now = loop.time() * 1000
        bound = sent_at - now
        if bound > self._bound or now - self._bound_at > FRESH_MS:
            better = bound > self._bound
            self._bound, self._bound_at = bound, now
            if better and self._frames:
                self._schedule(loop)  # what is held may go sooner
        at = list(timestamps)
        ordered = sorted(at)  # in C: a frame comes in due order, checked at a tenth of the cost
        if ordered != at:
            order = sorted(range(len(at)), key=at.__getitem__)
            deliveries = [deliveries[i] for i in order]
            at = ordered
        frame = _Frame(deliveries, at)
        broker_now = self._broker_now(now)
        # Held deliveries already due go with this frame's, in due order: the
        # timer that should have released them may not have run yet (a busy
        # loop), and a frame read first must not overtake them.
        ready = self._take(broker_now) if self._frames else []
        mine = frame.take(broker_now)
        if mine:
            ready.append(mine)
        if ready:
            self._release(_in_due_order(ready))
        if frame.sent < len(at):
            heapq.heappush(self._frames, (at[frame.sent], next(self._order), frame))
            self._schedule(loop)

    def clear(self) -> list[Delivery]:
        """Stop holding: the deliveries not released yet."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer, self._timer_at = None, float("inf")
        left = [d for _, _, f in sorted(self._frames) for d in f.deliveries[f.sent :]]
        self._frames.clear()
        self._loop = None
        return left

    def release_due(self) -> bool:
        """Release now what the timer would release when the loop next runs it
        (its time has come, it has not run yet: the loop was busy handing out
        deliveries); the timer is set for what is left. Whether any was
        released: the one who asks takes them at once, with no wake and no
        loop turn between."""
        loop = self._loop
        if self._timer is None or loop is None or loop.time() * 1000 < self._timer_at:
            return False
        self._timer.cancel()
        return self._fire()

    def last_release_s(self) -> float:
        """Seconds until the last held delivery is due (0 when none is held)."""
        if not self._frames:
            return 0.0
        last = max(f.at[-1] for _, _, f in self._frames)
        loop = self._loop or asyncio.get_running_loop()
        return max(0.0, self._mono_ms(last) / 1000 - loop.time())

    def _broker_now(self, mono_ms: float) -> float:
        """A lower bound of the broker's clock at our monotonic ``mono_ms``."""
        return mono_ms + self._bound - MARGIN_MS

    def _mono_ms(self, timestamp: int) -> float:
        """Our monotonic ms by which the broker's clock surely reached ``timestamp``."""
        return timestamp - self._bound + MARGIN_MS

    def _schedule(self, loop: asyncio.AbstractEventLoop, woke_early: bool = False) -> None:
        """Set the timer for the earliest held delivery. ``woke_early``: the timer
        ran before its time by the loop's own clock, as on a loop whose clock
        moves a whole ms at a time and whose timers run up to a ms early
        (uvloop); set at that time again it would run again at once until the
        clock moves: it is set at the next whole ms instead, where that clock
        has surely reached it."""
        first = self._mono_ms(self._frames[0][0])
        if woke_early:
            first = float(math.ceil(first))
        if first < self._timer_at:
            if self._timer is not None:
                self._timer.cancel()
            self._timer_at = first
            self._timer = loop.call_at(first / 1000, self._fire)

    def _fire(self) -> bool:
        loop = self._loop
        assert loop is not None  # set by the add that set the timer
        self._timer, self._timer_at = None, float("inf")
        ready = self._take(self._broker_now(loop.time() * 1000))
        if ready:
            self._release(_in_due_order(ready))
        if self._frames:
            self._schedule(loop, woke_early=not ready)
        return bool(ready)

    def _take(self, broker_now: float) -> list[Sequence[Delivery]]:
        """Take every held delivery due by ``broker_now``: a piece a frame."""
        ready: list[Sequence[Delivery]] = []
        frames = self._frames
        while frames and frames[0][0] <= broker_now:
            _, _, frame = heapq.heappop(frames)
            piece = frame.take(broker_now)
            if piece:
                ready.append(piece)
            if frame.sent < len(frame.at):
                heapq.heappush(frames, (frame.at[frame.sent], next(self._order), frame))
        return ready


def _in_due_order(pieces: list[Sequence[Delivery]]) -> Sequence[Delivery]:
    """The pieces of frames as one sequence in due order; one piece (in due
    order already) as it is, its deliveries not looked at."""
    if len(pieces) == 1:
        return pieces[0]
    ready = [d for piece in pieces for d in piece]
    if any(a.timestamp_ms > b.timestamp_ms for a, b in pairwise(ready)):
        ready.sort(key=lambda d: d.timestamp_ms)
    return ready
