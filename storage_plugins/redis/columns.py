"""Packing a batch's arguments as a few columns (the scripts' side: ``cut`` and
``decimals`` in ``helpers.lua``).

redis-py packs every argument of a command in Python, ~2 us each: an insert of
1,000 messages as six arguments a message cost ~15 ms of the broker's one
thread, while every other call waited. As columns (numbers comma-separated,
ids and payloads each one string with their lengths) it is a handful of
arguments whatever the batch size.
"""

from __future__ import annotations

from collections.abc import Iterable


def decimals(numbers: Iterable[int]) -> str:
    """``[1, 2, 3]`` -> ``'1,2,3'``."""
    return ",".join(map(str, numbers))


def strings(values: Iterable[bytes]) -> tuple[bytes, str]:
    """Byte strings as one string and their lengths."""
    parts = list(values)
    return b"".join(parts), decimals(map(len, parts))


def texts(values: Iterable[str]) -> tuple[bytes, str]:
    """Text (ids) as one UTF-8 string and the byte lengths."""
    return strings(v.encode() for v in values)
