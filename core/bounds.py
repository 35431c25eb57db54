"""A rule on a number, stated once: it lies in ``low .. high`` (or is 0, for a
field where 0 means "none" or "now" whatever the range).

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
    # Why a value under ``low`` is, when that says more (empty: ``reason``).
    below: str = ""
    # 0 is taken too, whatever ``low`` (a field where 0 means "none" or "now").
    or_zero: bool = False

    def error(self, value: int) -> str | None:
        """None when ``value`` is within the bound, else the reason."""
        if self.low <= value <= self.high or (value == 0 and self.or_zero):
            return None
        why = self.below if value < self.low and self.below else self.reason
        return why.format(value=value, low=self.low, high=self.high)

    def holds_for_all(self, values: Sequence[int]) -> bool:
        """Whether every value of ``values`` is within the bound."""
        if not len(values):
            return True
        if max(values) > self.high:
            return False
        least = min(values)
        if least < self.low and self.or_zero and least == 0:
            least = min((v for v in values if v), default=self.low)  # the rarer, slower case
        return self.low <= least
