"""The dead timeline: list, redrive, purge."""

from __future__ import annotations

from collections.abc import Sequence

from dejaq.core.model import Message
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.keys import Slot
from dejaq.storage_plugins.redis.reads import read
from dejaq.storage_plugins.redis.registry import TopicEntry, per_slot
from dejaq.storage_plugins.redis.scripts import Call, Runner


async def list_dead(runner: Runner, info: TopicEntry, after_id: str, limit: int) -> list[Message]:
    """Up to ``limit`` ids after ``after_id`` from every slot, then the records
    of the first ``limit`` of them."""
    low = b"(" + after_id.encode() if after_id else b"-"
    pages = await per_slot(
        runner,
        info,
        lambda s: Call(lua.DEAD_PAGE, (s.alive, s.dead_ids), (info.gen, low, limit)),
        durable=False,  # a read
    )
    # Byte order of UTF-8 (Redis) is code point order (Python str).
    first = sorted((id, home) for home, page in enumerate(pages) for id in page)[:limit]
    by_home: dict[int, list[str]] = {}
    for id, home in first:
        by_home.setdefault(home, []).append(id.decode())
    found = await read(runner, info, by_home)
    return sorted((m for m in found if m is not None and m.dead), key=lambda m: m.id)


async def redrive(runner: Runner, info: TopicEntry, ids: Sequence[str] | None, at: int) -> int:
    if ids is None:
        replies = await per_slot(runner, info, lambda s: _redrive(info, s, at, "all", []))
    else:
        groups = {h: [ids[i] for i in idx] for h, idx in info.by_home(ids).items()}
        replies = await per_slot(
            runner, info, lambda s: _redrive(info, s, at, "ids", groups[s.index]), list(groups)
        )
    return sum(redriven for [redriven] in replies)


async def purge(runner: Runner, info: TopicEntry, died_before: int) -> int:
    replies = await per_slot(
        runner,
        info,
        lambda s: Call(lua.PURGE, (s.alive, s.dead, s.dead_ids), (info.gen, s.prefix, died_before)),
    )
    return sum(purged for [purged] in replies)


def _redrive(info: TopicEntry, s: Slot, at: int, which: str, ids: Sequence[str]) -> Call:
    keys = (s.alive, s.heads, s.dead, s.dead_ids, *info.optional(s))
    return Call(lua.REDRIVE, keys, (info.gen, s.prefix, at, which, *ids))
