"""The broker's bound on open streams (Produce and Consume together), and how a
stream is refused before its first frame.

A stream past ``max_streams`` is refused with RESOURCE_EXHAUSTED before it is
served: each open stream holds buffers, a reader task and, for a consumer, a
place in a dispatcher, so their number must not grow without end.

A refusal sent before the client's opening frame has arrived races with the
client's write of it: a client whose write fails sees grpc's own "Internal
error from Core" (grpc/grpc#36066), not the refusal. So a refused stream first
waits (briefly) for that frame, then ends with its status.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from dejaq.core.errors import ResourceExhausted

# How long a refused stream waits for its opening frame.
FIRST_FRAME_WAIT_S = 1.0


async def after_opening_frame(requests: AsyncIterator[Any]) -> None:
    """Return once the stream's opening frame has come (or ended, or a short
    wait has passed): a refusal sent now reaches the client as sent."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(anext(requests), FIRST_FRAME_WAIT_S)


class StreamSlots:
    """Counts open streams and refuses one past the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    @contextlib.asynccontextmanager
    async def slot(self, requests: AsyncIterator[Any]) -> AsyncIterator[None]:
        """Hold one slot for the body; ``ResourceExhausted`` when none is free
        (after the opening frame of ``requests``, which is then not served)."""
        if self.open >= self.limit:
            await after_opening_frame(requests)
            raise ResourceExhausted(
                f"this broker serves at most {self.limit} streams at once"
                " (--max-streams): retry later or on another broker"
            )
        self.open += 1
        try:
            yield
        finally:
            self.open -= 1
