"""A message's headers are checked whole every time: a set of names seen
before (checked once a set, for speed) still has each value checked."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument
from dejaq.core.headers import MAX_HEADER_BYTES, check_headers


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({"trace": "a\nb", "user": "u1"}, "header 'trace' holds a control character"),
        ({"trace": "t", "user": 7}, "header names and values are strings"),
        ({"trace": "\ud800", "user": "u1"}, "header 'trace' is not UTF-8"),
        (
            {"trace": "t" * MAX_HEADER_BYTES, "user": "u1"},
            f"headers are at most {MAX_HEADER_BYTES} bytes in all",
        ),
        ({"trace": "é" * (MAX_HEADER_BYTES // 2), "user": ""}, "bytes in all"),
    ],
)
def test_names_seen_before_still_have_their_values_checked(
    values: dict[str, object], says: str
) -> None:
    # Given a set of names checked and found good, many times over
    for i in range(3):
        assert check_headers({"trace": f"t{i}", "user": "é"}) == {"trace": f"t{i}", "user": "é"}
    # When the same names come with a bad value, then it is refused, saying why
    with pytest.raises(InvalidArgument, match=says):
        check_headers(values)  # type: ignore[arg-type]


def test_names_seen_before_keep_their_order_and_are_a_new_dict() -> None:
    # Given headers whose names were seen before
    given = {"b": "2", "a": "1"}
    check_headers(given)
    # When they are checked again, then the same headers come back, in order, apart
    again = check_headers(given)
    assert list(again.items()) == [("b", "2"), ("a", "1")]
    assert again is not given
