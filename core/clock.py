"""The clock: integer epoch milliseconds, UTC. The broker judges "due" by one
``Clock``: the storage server's on Redis and PostgreSQL
(``broker/clock/storage_clock.py``), else this host's wall clock (``WallClock``).

``now_ms`` is the wall clock itself. Code that sleeps until a millisecond (the
dispatcher) takes a ``Clock``, so tests can drive it with a clock of their own.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


def now_ms() -> int:
    return time.time_ns() // 1_000_000


PREEMPTED_NS = 200_000  # two monotonic readings further apart: read again


def clocks_us() -> tuple[int, int]:
    """This host's wall clock and monotonic clock (µs), read together: their
    difference stays put until the wall clock is stepped (NTP, an operator),
    which moves it by the step. The wall clock is read between two monotonic
    readings, again when a preemption came between them."""
    for _ in range(3):
        before = time.monotonic_ns()
        wall = time.time_ns()
        after = time.monotonic_ns()
        if after - before < PREEMPTED_NS:
            break
    return wall // 1_000, (before + after) // 2_000


class Wake:
    """A flag one sleeper waits on, set by anyone (an ``asyncio.Event`` for a
    single waiter, without the task and timeout machinery ``asyncio.wait_for``
    adds to every wait: the dispatcher sleeps and wakes about once a millisecond
    under load, and on this kind of machine that machinery cost ~60 us a time)."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        self._set = True
        if self._waiter is not None:
            _resolve(self._waiter)

    def clear(self) -> None:
        self._set = False

    async def wait(self, timeout_s: float | None = None) -> None:
        """Return once set, or after ``timeout_s``; one waiter at a time."""
        if self._set:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = None if timeout_s is None else loop.call_later(timeout_s, _resolve, waiter)
        try:
            await waiter
        finally:
            if self._waiter is waiter:  # a cancelled wait may end after the next began
                self._waiter = None
            if timer is not None:
                timer.cancel()


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class Clock(Protocol):
    """Where the broker reads the time and waits for a millisecond."""

    def now_ms(self) -> int: ...

    async def wait_until(self, at_ms: int, wake: Wake) -> None:
        """Return at ``at_ms`` or as soon as ``wake`` is set, whichever comes first."""
        ...


class WallClock:
    """The real clock: epoch milliseconds, and sleeps aimed at the wall clock
    (not the event loop's monotonic one) so a wake-up lands on the due millisecond."""

    def now_ms(self) -> int:
        return now_ms()

    async def wait_until(self, at_ms: int, wake: Wake) -> None:
        delay = at_ms / 1000 - time.time()
        if delay > 0:
            await wake.wait(delay)
