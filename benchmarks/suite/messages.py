"""What every scenario sends: 100-byte payloads and distinct ids."""

from __future__ import annotations

import itertools
import secrets

from .plan import PAYLOAD_BYTES

PAYLOAD = bytes(i % 256 for i in range(PAYLOAD_BYTES))


class Ids:
    """Distinct 26-character ids: a random 8-hex prefix and a counter."""

    def __init__(self) -> None:
        self.prefix = secrets.token_hex(4)
        self._next = itertools.count()

    def take(self, n: int) -> list[str]:
        p = self.prefix
        return [f"{p}-{next(self._next):017d}" for _ in range(n)]
