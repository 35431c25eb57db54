"""Reading the scripts' replies (see ``scripts`` for how they are packed)."""

from __future__ import annotations

from typing import Any

from dejaq.storage_plugins.redis import scripts as lua


class TopicChanged(Exception):
    """A script found its slot's topic generation gone or different."""


def body(reply: list[Any]) -> list[Any]:
    """A script reply without its status; ``TopicChanged`` when the topic is gone."""
    if reply[0] == lua.GONE:
        raise TopicChanged
    return reply[1:]


def text(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def ints(packed: bytes) -> list[int]:
    """Numbers a script packed as ``'1,2,3'``."""
    return [int(n) for n in packed.split(b",")] if packed else []


def groups(packed: bytes, width: int) -> list[tuple[int, ...]]:
    """Packed numbers in groups of ``width`` (one group per item)."""
    numbers = ints(packed)
    return [tuple(numbers[i : i + width]) for i in range(0, len(numbers), width)]
