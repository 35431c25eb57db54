"""One retry back-off for the driver's streams (produce and consume)."""

from __future__ import annotations

import asyncio
import time


class Backoff:
    """Exponential back-off under a deadline: 50 ms, 100 ms, 200 ms ... capped at 1 s.

    ``expired`` says when the caller should give up; ``wait`` sleeps the next step.
    """

    def __init__(self, timeout_s: float, first_s: float = 0.05, cap_s: float = 1.0) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.first_s = first_s
        self.cap_s = cap_s
        self.attempt = 0

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    async def wait(self) -> None:
        await asyncio.sleep(min(self.cap_s, self.first_s * 2**self.attempt))
        self.attempt += 1
