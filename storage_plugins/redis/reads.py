"""Reading messages and counting them: get, counts, and the oldest (census)."""

from __future__ import annotations

from dejaq.core.model import Counts, Message
from dejaq.storage_plugins.base import Forecast, Head, KeyLoad
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.registry import TopicEntry, per_slot
from dejaq.storage_plugins.redis.replies import body, ints, text
from dejaq.storage_plugins.redis.scripts import Call, Runner


async def read(
    runner: Runner, info: TopicEntry, ids_by_home: dict[int, list[str]]
) -> list[Message | None]:
    """Messages by id (grouped by home slot), in the order given."""
    calls = []
    for home, ids in ids_by_home.items():
        s = info.slot(home)
        calls.append(Call(lua.READ, (s.alive,), (info.gen, s.prefix, *ids)))
    out: list[Message | None] = []
    replies = await runner.run(calls, durable=False)
    for ids, reply in zip(ids_by_home.values(), replies, strict=True):
        found = body(reply)
        for k, id in enumerate(ids):
            item = found[k * lua.READ_ITEM : (k + 1) * lua.READ_ITEM]
            exists, ts, v, n, owner, bucket, md, ex, dead, priority, payload, key, headers = item
            if not exists:
                out.append(None)
                continue
            out.append(
                Message(
                    id,
                    int(ts),
                    payload or b"",
                    int(v),
                    int(n),
                    text(owner),
                    int(bucket),
                    int(md),
                    int(ex),
                    dead == b"1",
                    int(priority or 0),
                    text(key) or "",
                    headers or b"",
                )
            )
    return out


async def counts(runner: Runner, info: TopicEntry, now: int) -> Counts:
    replies = await per_slot(
        runner,
        info,
        lambda s: Call(lua.COUNTS, (s.alive, s.heads, s.grants, s.dead), (info.gen, s.prefix, now)),
        durable=False,
    )
    live, due, leased, dead = (sum(column) for column in zip(*replies, strict=True))
    return Counts(waiting=live - due - leased, due=due, leased=leased, dead=dead)


async def oldest(runner: Runner, info: TopicEntry, now: int) -> tuple[int | None, Head | None]:
    """The topic's oldest live timestamp and, when that is a rank, its head at
    ``now``: one script per slot, each reading its ``heads`` (and, past a
    rank, a record and the timelines ``waits`` says may hold one due)."""
    replies = await per_slot(
        runner,
        info,
        lambda s: Call(
            lua.OLDEST, (s.alive, s.heads, *info.optional(s)), (info.gen, s.prefix, now)
        ),
        durable=False,
    )
    firsts = [(int(at), int(priority)) for at, priority, _ in replies if at]
    if not firsts:
        return None, None
    at, priority = min(firsts)
    if at >= 0:
        return at, None
    # Due and not ranked: what a slot with ranks found behind them, and the
    # oldest of a slot that has none (its first score is then no rank).
    dues = [int(due) for *_, due in replies if due]
    dues += [first for first, _ in firsts if 0 <= first <= now]
    return at, Head(priority, min(dues, default=None))


async def forecast(runner: Runner, info: TopicEntry, request: Forecast) -> list[int]:
    """Waiting messages by due-time bin: one script per slot, each a ZCOUNT per
    bin on the slot's timelines and its ``owned`` set (see lua/forecast.lua),
    summed over the slots."""
    args = (request.now, request.step_ms, request.bins)
    replies = await per_slot(
        runner,
        info,
        lambda s: Call(lua.FORECAST, (s.alive, s.heads, s.grants), (info.gen, s.prefix, *args)),
        durable=False,
    )
    return [sum(int(n) for n in column) for column in zip(*replies, strict=True)]


async def busiest(runner: Runner, info: TopicEntry, now: int, limit: int) -> list[KeyLoad]:
    """The keys with the most messages due by ``now``: one script per slot
    (lua/busiest.lua: a ZCOUNT per due lane, the leased records), summed."""
    replies = await per_slot(
        runner,
        info,
        lambda s: Call(lua.BUSIEST, (s.alive, s.heads, s.grants), (info.gen, s.prefix, now)),
        durable=False,
    )
    due: dict[str, int] = {}
    held: dict[str, int] = {}
    oldest: dict[str, int] = {}
    for names, packed in replies:
        numbers = ints(packed)
        for i, name in enumerate(names):
            key = name.decode()
            d, h, o = numbers[3 * i : 3 * i + 3]
            due[key] = due.get(key, 0) + d
            held[key] = held.get(key, 0) + h
            if o and (not oldest.get(key) or o < oldest[key]):
                oldest[key] = o
    loads = [KeyLoad(k, due[k], held[k], oldest.get(k, 0)) for k in due if due[k] or held[k]]
    loads.sort(key=lambda k: (-k.due, k.key))
    return loads[:limit]
