"""A bound that also takes 0 (a field where 0 means now or none) judges one
value and a whole column alike, and says why a value under it is refused."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dejaq.core.bounds import Bound

BOUND = Bound(100, 200, "{value} is out", below="{value} is under {low}", or_zero=True)
values = st.sampled_from([-1, 0, 1, 99, 100, 150, 200, 201])


def test_zero_passes_and_a_value_under_the_range_says_so() -> None:
    assert BOUND.error(0) is None and BOUND.error(100) is None
    assert BOUND.error(5) == "5 is under 100" and BOUND.error(201) == "201 is out"
    assert Bound(100, 200, "{value} is out").error(0) == "0 is out"


@given(st.lists(values, max_size=6))
def test_a_column_holds_exactly_when_each_of_its_values_does(column: list[int]) -> None:
    assert BOUND.holds_for_all(column) == all(BOUND.error(v) is None for v in column)
