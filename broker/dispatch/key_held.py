"""The messages of each key this broker holds under a lease, for the limits per key.

A key's held count goes up with each message leased here (``LeasedMessage.key``)
and down when it is acked, nacked, handed back, sent at most once (deleted as
it was leased: it is held only until it leaves), or when its lease runs out
(a consumer that left or stopped settling: storage redelivers it then). An
extend moves the lease's end. A settle made through another broker (a unary
call there) is not seen here: the message counts until its lease runs out.

Only messages with a key are counted. Expiry is a heap of lease ends with
stale entries skipped, so each pass's sweep costs what has run out.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable


class KeyHeld:
    """Held messages by key: ``id -> (key, lease end)``."""

    __slots__ = ("_by_id", "_counts", "_ends")

    def __init__(self) -> None:
        self._by_id: dict[str, tuple[str, int]] = {}
        self._counts: dict[str, int] = {}
        self._ends: list[tuple[int, str]] = []

    def __len__(self) -> int:
        return len(self._by_id)

    def held(self, key: str) -> int:
        return self._counts.get(key, 0)

    def keys(self) -> Iterable[str]:
        """The keys with messages held here."""
        return self._counts.keys()

    def leased(self, messages: Iterable[tuple[str, str]], until: int) -> None:
        """``(id, key)`` were leased here until ``until``."""
        for id, key in messages:
            if not key:
                continue
            old = self._by_id.get(id)
            if old is not None:
                self._drop(id, old[0])
            self._by_id[id] = (key, until)
            self._counts[key] = self._counts.get(key, 0) + 1
            heapq.heappush(self._ends, (until, id))

    def extended(self, ids: Iterable[str], until: int) -> None:
        """The leases of ``ids`` now run to ``until``."""
        for id in ids:
            entry = self._by_id.get(id)
            if entry is not None:
                self._by_id[id] = (entry[0], until)
                heapq.heappush(self._ends, (until, id))

    def released(self, ids: Iterable[str]) -> None:
        """``ids`` are no longer held here (settled, handed back, sent at most once)."""
        for id in ids:
            entry = self._by_id.pop(id, None)
            if entry is not None:
                self._drop(id, entry[0])

    def expire(self, now: int) -> None:
        """Leases that ran out by ``now`` no longer count."""
        ends = self._ends
        while ends and ends[0][0] <= now:
            until, id = heapq.heappop(ends)
            entry = self._by_id.get(id)
            if entry is not None and entry[1] == until:
                del self._by_id[id]
                self._drop(id, entry[0])
        if not self._by_id and ends:
            ends.clear()  # only stale entries are left

    def _drop(self, id: str, key: str) -> None:
        n = self._counts[key] - 1
        if n:
            self._counts[key] = n
        else:
            del self._counts[key]
