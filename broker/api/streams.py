"""The broker's bound on open streams (Produce and Consume together).

A stream past ``max_streams`` is refused with RESOURCE_EXHAUSTED before it
reads a frame: each open stream holds buffers, a reader task and, for a
consumer, a place in a dispatcher, so their number must not grow without end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from dejaq.core.errors import ResourceExhausted


class StreamSlots:
    """Counts open streams and refuses one past the limit."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        """Hold one slot for the body; ``ResourceExhausted`` when none is free."""
        if self.open >= self.limit:
            raise ResourceExhausted(
                f"this broker serves at most {self.limit} streams at once"
                " (--max-streams): retry later or on another broker"
            )
        self.open += 1
        try:
            yield
        finally:
            self.open -= 1
