"""A topic's live messages a page at a time in (timestamp, id) order
(``Storage.by_due``), with plain sorted-set reads, a round trip each step,
every timeline of the topic at once:

1. each slot's ``heads``: the buckets whose timelines hold anything;
2. after a cursor, where it falls in each timeline: the members scored
   before its time (ZCOUNT), and those at its time (sorted by id within a
   score), searched by rank for the first id after it (a round trip per
   halving, none when no member shares the cursor's time);
3. ``limit`` members from there in each timeline; merged, the first
   ``limit`` are the page, read as records (``reads.read``).

Read only, so a page is no transaction: a member moved meanwhile may show
twice or not at all (as the contract allows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dejaq.core.model import Message
from dejaq.storage_plugins.redis.reads import read
from dejaq.storage_plugins.redis.registry import TopicEntry
from dejaq.storage_plugins.redis.scripts import Call, Runner


async def by_due(
    runner: Runner, info: TopicEntry, after: tuple[int, str] | None, limit: int
) -> list[Message]:
    slots = [info.slot(i) for i in range(info.slots)]
    heads = await _each(runner, [("ZRANGE", s.heads, 0, -1) for s in slots])
    timelines = [s.timeline(b) for s, buckets in zip(slots, heads, strict=True) for b in buckets]
    if not timelines:
        return []
    starts = [0] * len(timelines) if after is None else await _starts(runner, timelines, *after)
    pages = await _each(
        runner,
        [
            ("ZRANGE", tl, start, start + limit - 1, "WITHSCORES")
            for tl, start in zip(timelines, starts, strict=True)
        ],
    )
    entries = sorted(entry for page in pages for entry in _scored(page))[:limit]
    ids_by_home: dict[int, list[str]] = {}
    for _, id in entries:
        ids_by_home.setdefault(info.home(id), []).append(id)
    found = {m.id: m for m in await read(runner, info, ids_by_home) if m is not None}
    return [found[id] for _, id in entries if id in found and not found[id].dead]


async def _starts(runner: Runner, timelines: list[str], at: int, after_id: str) -> list[int]:
    """The rank in each timeline of its first member after (at, after_id)."""
    counts = await _each(
        runner,
        [
            command
            for tl in timelines
            for command in (("ZCOUNT", tl, "-inf", f"({at}"), ("ZCOUNT", tl, at, at))
        ],
    )
    low = [int(n) for n in counts[0::2]]
    high = [lo + int(n) for lo, n in zip(low, counts[1::2], strict=True)]
    searching = [i for i in range(len(timelines)) if low[i] < high[i]]
    while searching:  # among the members at the cursor's time, by id
        mids = [(low[i] + high[i]) // 2 for i in searching]
        probes = await _each(
            runner, [("ZRANGE", timelines[i], m, m) for i, m in zip(searching, mids, strict=True)]
        )
        for i, mid, probe in zip(searching, mids, probes, strict=True):
            if probe and probe[0].decode() > after_id:
                high[i] = mid
            else:
                low[i] = mid + 1
        searching = [i for i in searching if low[i] < high[i]]
    return low


def _scored(reply: list[Any]) -> list[tuple[int, str]]:
    """(score, member) of a ZRANGE ... WITHSCORES reply: pairs (RESP3) or flat (RESP2)."""
    if reply and isinstance(reply[0], list | tuple):
        return [(int(float(score)), member.decode()) for member, score in reply]
    return [(int(float(reply[i + 1])), reply[i].decode()) for i in range(0, len(reply), 2)]


async def _each(runner: Runner, commands: Sequence[tuple[Any, ...]]) -> list[Any]:
    """Plain commands, one round trip (each reply in order)."""
    calls = [Call(None, (), command) for command in commands]
    return list(await runner.run(calls, durable=False))
