"""A column of keys is checked in one pass when every key is plain ASCII, and
agrees with the check of each key alone."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument
from dejaq.core.keys import MAX_KEY_BYTES, all_ascii_keys, ascii_keys_from_utf8, check_key

COLUMNS = [
    ["tenant-1", "", "user-7"],
    ["k" * MAX_KEY_BYTES, "a"],
    ["k" * (MAX_KEY_BYTES + 1), "a"],
    ["fine", "tab\there"],
    ["fine", "del\x7f"],
    ["tenant-é", "b"],
    ["\ud800"],
    [],
]


def _each_fits(keys: list[str]) -> bool:
    try:
        for key in keys:
            check_key(key)
    except InvalidArgument:
        return False
    return True


@pytest.mark.parametrize("keys", COLUMNS)
def test_a_column_passes_at_once_only_where_each_key_would(keys: list[str]) -> None:
    # given a column of keys; when it is checked at once
    at_once = all_ascii_keys(keys)
    # then it passes only where each key passes alone, and all ASCII ones that do pass
    assert not at_once or _each_fits(keys)
    assert at_once == (_each_fits(keys) and "".join(keys).isascii())


@pytest.mark.parametrize("keys", [k for k in COLUMNS if "\ud800" not in k])
def test_keys_read_from_the_wire_at_once_are_those_each_check_reads(keys: list[str]) -> None:
    # given the column as the wire carries it; when it is read at once
    read = ascii_keys_from_utf8([k.encode() for k in keys])
    # then it is the keys themselves, or None where a key must be looked at alone
    assert read == (keys if all_ascii_keys(keys) else None)


def test_bytes_that_are_not_utf8_are_left_to_the_check_of_each() -> None:
    assert ascii_keys_from_utf8([b"ok", b"\xff\xfe"]) is None
