"""Paging through one bucket by id (``Storage.scan``).

A bucket's live ids are the members of its timeline ``tl:<bucket>`` — in the
bucket's slot, and in the slots its ``stray-homes`` name — whose order is by
time, not id: a page reads them all and sorts them (O(bucket) a page). Dead
ids are kept per slot in byte order (``dead-ids``) without their bucket, so a
page takes up to ``limit + 1`` of them after the cursor from every slot and
keeps those whose record names the bucket. One round trip for the ids (the
live ids are read without a script, so a page does not block the server for
a whole bucket's sort), one for the records.
"""

from __future__ import annotations

from dejaq.core.model import Message
from dejaq.storage_plugins.base import ScanPage
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.reads import read
from dejaq.storage_plugins.redis.registry import TopicEntry
from dejaq.storage_plugins.redis.replies import body
from dejaq.storage_plugins.redis.scripts import Call, Runner


async def scan(
    runner: Runner, info: TopicEntry, bucket: int, after_id: str, limit: int
) -> ScanPage:
    if not 0 <= bucket < info.buckets:
        return ScanPage([], None)
    own = info.slot_of(bucket)
    strays = await runner.command("SMEMBERS", info.slot(own).stray_homes)
    homes = sorted({own} | {int(h) for h in strays})
    low = b"(" + after_id.encode() if after_id else b"-"
    calls = [Call(None, (), ("ZRANGE", info.slot(h).timeline(bucket), 0, -1)) for h in homes]
    slots = [info.slot(i) for i in range(info.slots)]
    calls += [Call(lua.DEAD_PAGE, (s.alive, s.dead_ids), (info.gen, low, limit + 1)) for s in slots]
    replies = await runner.run(calls)

    found: dict[str, int] = {}  # id -> the slot that holds it
    for home, members in zip(homes, replies[: len(homes)], strict=True):
        found.update((m.decode(), home) for m in members)
    live = {id: home for id, home in found.items() if id > after_id}
    cut: str | None = None  # a slot had more dead ids than it sent: stop at its last one
    for home, reply in enumerate(replies[len(homes) :]):
        dead = [m.decode() for m in body(reply)]
        live.update((id, home) for id in dead)
        if len(dead) > limit and (cut is None or dead[-1] < cut):
            cut = dead[-1]
    ids = sorted(id for id in live if cut is None or id <= cut)
    more = cut is not None or len(ids) > limit
    ids = ids[:limit]

    by_home: dict[int, list[str]] = {}
    for id in ids:
        by_home.setdefault(live[id], []).append(id)
    records = await read(runner, info, by_home)
    messages: list[Message] = sorted(
        (m for m in records if m is not None and m.bucket == bucket), key=lambda m: m.id
    )
    return ScanPage(messages, ids[-1] if more and ids else None)
