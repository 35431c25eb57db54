"""One retry back-off for the driver's streams (produce and consume)."""

from __future__ import annotations

import asyncio
import time

from dejaq.core import backoff


class Backoff:
    """Back-off under a deadline: 50 ms, 100 ms, 200 ms ... capped at 1 s, each
    wait jittered (``core/backoff.py``), so clients that lost a broker together
    do not all come back at the same instant.

    ``expired`` says when the caller should give up; ``wait`` sleeps the next step.
    """

    def __init__(self, timeout_s: float, first_s: float = 0.05, cap_s: float = 1.0) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.steps = backoff.Backoff(first_s, cap_s)
        self.attempt = 0

    def expired(self) -> bool:
        return time.monotonic() > self.deadline

    async def wait(self) -> None:
        await asyncio.sleep(self.steps.delay(self.attempt))
        self.attempt += 1
