"""Owners: lease owner names as small numbers, so a column can hold them.

Number 0 means "no owner". A number is given back for reuse when the last
message leased to its owner lets go, so consumers that come and go do not
pile up names.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


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

    def let_go(self, numbers: npt.NDArray[np.uint32]) -> None:
        """Each number in ``numbers`` (0s ignored) lets go of one message."""
        numbers = numbers[numbers != 0]
        if not len(numbers):
            return
        if (numbers == numbers[0]).all():  # the usual batch: one consumer's messages
            counts = [(int(numbers[0]), len(numbers))]
        else:
            distinct, times = np.unique(numbers, return_counts=True)
            counts = list(zip(distinct.tolist(), times.tolist(), strict=True))
        self._release(counts)

    def let_go_counts(self, counts: dict[int, int]) -> None:
        """Number ``k`` lets go of ``counts[k]`` messages (as ``let_go`` of
        ``counts[k]`` times ``k``)."""
        if counts:
            self._release(sorted(counts.items()))

    def _release(self, counts: list[tuple[int, int]]) -> None:
        """Each number lets go of its count, in order; one that holds nothing
        more is given back."""
        for k, n in counts:
            self._held[k] -= n
            if self._held[k] == 0:
                name = self.names[k]
                assert name is not None
                del self._numbers[name]
                self.names[k] = None
                self._unused.append(k)
