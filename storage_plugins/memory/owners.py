"""Owners: lease owner names as small numbers, so a column can hold them.

Number 0 means "no owner". A number is given back for reuse when the last
message leased to its owner lets go, so consumers that come and go do not
pile up names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


class Owners:
    """Owner name <-> number, with the count of messages each holds."""

    def __init__(self) -> None:
        self.names: list[str | None] = [None]  # number -> name; [0] = no owner
        self._numbers: dict[str, int] = {}
        self._held: list[int] = [0]
        self._unused: list[int] = []

    def number(self, name: str) -> int | None:
        """The number of ``name``, or None when it holds nothing."""
        return self._numbers.get(name)

    def hold(self, name: str, count: int) -> int:
        """``name`` takes ``count`` more messages; its number."""
        k = self._numbers.get(name)
        if k is None:
            if self._unused:
                k = self._unused.pop()
                self.names[k] = name
            else:
                k = len(self.names)
                self.names.append(name)
                self._held.append(0)
            self._numbers[name] = k
        self._held[k] += count
        return k

    def let_go(self, numbers: Iterable[int]) -> int:
        """Each number in ``numbers`` (0s ignored) lets go of one message; how many did."""
        total = 0
        for k, n in Counter(numbers).items():
            if k == 0:
                continue
            total += n
            self._held[k] -= n
            if self._held[k] == 0:
                name = self.names[k]
                assert name is not None
                del self._numbers[name]
                self.names[k] = None
                self._unused.append(k)
        return total
