"""Message ids the broker generates."""

from __future__ import annotations

import itertools
import secrets

from dejaq.core.clock import now_ms


class IdGenerator:
    """Time-ordered, unique across brokers: ms timestamp, a per-broker random
    prefix and a counter (``0191f3a2b4c-5f2a9c1e-000001``)."""

    def __init__(self) -> None:
        self._prefix = secrets.token_hex(4)
        self._counter = itertools.count(1)

    def __call__(self) -> str:
        return f"{now_ms():011x}-{self._prefix}-{next(self._counter):06x}"

    def many(self, n: int) -> list[str]:
        """``n`` fresh ids at once (one clock read, one prefix)."""
        head = f"{now_ms():011x}-{self._prefix}-"
        counter = self._counter
        return [f"{head}{next(counter):06x}" for _ in range(n)]
