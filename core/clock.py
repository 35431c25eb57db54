"""The one clock: integer epoch milliseconds, UTC. The broker judges "due" by it.

``now_ms`` is the wall clock itself. Code that sleeps until a millisecond (the
dispatcher) takes a ``Clock``, so tests can drive it with a clock of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class Clock(Protocol):
    """Where the broker reads the time and waits for a millisecond."""

    def now_ms(self) -> int: ...

    async def wait_until(self, at_ms: int, wake: asyncio.Event) -> None:
        """Return at ``at_ms`` or as soon as ``wake`` is set, whichever comes first."""
        ...


class WallClock:
    """The real clock: epoch milliseconds, and sleeps aimed at the wall clock
    (not the event loop's monotonic one) so a wake-up lands on the due millisecond."""

    def now_ms(self) -> int:
        return now_ms()

    async def wait_until(self, at_ms: int, wake: asyncio.Event) -> None:
        delay = at_ms / 1000 - time.time()
        if delay > 0 and not wake.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), delay)
