"""A rule on a number, stated once: it lies in ``low .. high``.

The same bound checks one value (naming what is wrong) and a whole column at
once (its min and max, at C speed), so a fast path over a batch and the check
of each of its values cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Bound:
    low: int
    high: int
    # Why a value outside is refused: formatted with ``value``, ``low`` and ``high``.
    reason: str

    def error(self, value: int) -> str | None:
        """None when ``value`` is within the bound, else the reason."""
        if self.low <= value <= self.high:
            return None
        return self.reason.format(value=value, low=self.low, high=self.high)

    def holds_for_all(self, values: Sequence[int]) -> bool:
        """Whether every value of ``values`` is within the bound."""
        return not values or (self.low <= min(values) and max(values) <= self.high)
