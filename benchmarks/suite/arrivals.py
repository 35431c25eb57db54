"""Messages a benchmark's consumer received, by id, and the wait until a set
of them is all in.

A wait is judged against the set it was given, from the moment it starts:
an id that arrived before counts, and the wait ends only when every other one
of the set has arrived too (or the time is up). A flag raised by earlier
arrivals, when the set asked for was still smaller, must not end it: the
messages still on their way would be counted as never delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable


class Arrivals:
    def __init__(self) -> None:
        self.at: dict[str, float] = {}  # id -> when it arrived (the caller's clock)
        self._missing: set[str] = set()
        self._all_in = asyncio.Event()

    def arrived(self, id: str, at: float) -> None:
        self.at[id] = at
        if id in self._missing:
            self._missing.discard(id)
            if not self._missing:
                self._all_in.set()

    async def wait_for(self, ids: Iterable[str], timeout_s: float) -> set[str]:
        """Until every one of ``ids`` arrived, or ``timeout_s`` passed; the
        ids still missing then."""
        self._missing = set(ids) - self.at.keys()
        self._all_in = asyncio.Event()
        if self._missing:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._all_in.wait(), timeout_s)
        missing, self._missing = self._missing, set()
        return missing
