"""Paging through one bucket by id (``Storage.scan``).

A bucket's live ids are the members of its timeline ``tl:<bucket>`` and of its
keys' lanes ``tl:<bucket>:<key>`` (those ``heads`` lists) — in the bucket's
slot, and in the slots its ``stray-homes`` name — whose order is by time, not
id. The first page of a bucket reads them all and sorts them; the order is kept
(``IdOrders``) for the next pages for as long as the bucket's ``entered``
counts stand still (no insert or redrive added a member since: members that
left are skipped when their records are read). A page then takes its ids from
the kept order by bisection, so reading a whole bucket costs its size once,
not once a page. Each page reads the counts, so an order kept by one broker is
never used after another broker added to the bucket.

Dead ids are kept per slot in byte order (``dead-ids``) without their bucket,
so a page takes up to ``limit + 1`` of them after the cursor from every slot
and keeps those whose record names the bucket. Round trips: the stray homes;
the counts with the dead ids (and the bucket's timelines, read after their
counts, when the kept order is stale); the records. The live ids are read
without a script, so a page does not block the server for a whole bucket.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from dejaq.core.model import Message
from dejaq.storage_plugins.base import ScanPage
from dejaq.storage_plugins.redis import keys
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.reads import read
from dejaq.storage_plugins.redis.registry import TopicEntry
from dejaq.storage_plugins.redis.replies import body
from dejaq.storage_plugins.redis.scripts import Call, Runner

KEEP = 8  # buckets whose order is kept, the least recently read dropped first


@dataclass(frozen=True, slots=True)
class IdOrder:
    """A bucket's live ids in order, each with its home slot, as of ``stamps``
    (the homes' ``entered`` counts of the bucket, read before the ids)."""

    homes: tuple[int, ...]
    stamps: tuple[Any, ...]
    ids: list[str]
    home_of: list[int]


class IdOrders:
    """The orders of the buckets read lately, by (topic, generation, bucket)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._kept: OrderedDict[tuple[str, str, int], IdOrder] = OrderedDict()

    def get(self, key: tuple[str, str, int]) -> IdOrder | None:
        order = self._kept.get(key)
        if order is not None:
            self._kept.move_to_end(key)
        return order

    def put(self, key: tuple[str, str, int], order: IdOrder) -> None:
        self._kept[key] = order
        self._kept.move_to_end(key)
        while len(self._kept) > self._keep:
            self._kept.popitem(last=False)


async def scan(
    runner: Runner, info: TopicEntry, bucket: int, after_id: str, limit: int, orders: IdOrders
) -> ScanPage:
    if not 0 <= bucket < info.buckets:
        return ScanPage([], None)
    own = info.slot_of(bucket)
    strays = await runner.command("SMEMBERS", info.slot(own).stray_homes, durable=False)
    homes = tuple(sorted({own} | {int(h) for h in strays}))
    low = b"(" + after_id.encode() if after_id else b"-"
    calls = [_stamp(info, h, bucket) for h in homes]
    slots = [info.slot(i) for i in range(info.slots)]
    calls += [Call(lua.DEAD_PAGE, (s.alive, s.dead_ids), (info.gen, low, limit + 1)) for s in slots]
    replies = await runner.run(calls, durable=False)

    key = (info.topic.name, info.gen, bucket)
    order = orders.get(key)
    # A scan's first page reads the bucket afresh: an order kept from before
    # the scan began is never trusted on counts alone (a broker of an older
    # version adds members without counting them).
    stamps = tuple(replies[: len(homes)])
    if order is None or order.homes != homes or order.stamps != stamps or not after_id:
        order = await _order(runner, info, bucket, homes)
        orders.put(key, order)
    at = bisect_right(order.ids, after_id)
    end = min(at + limit + 1, len(order.ids))
    found = dict(zip(order.ids[at:end], order.home_of[at:end], strict=True))  # id -> home
    # A source that had more ids than it sent: the page stops at its last one.
    cut = order.ids[end - 1] if end - at > limit else None
    for home, reply in enumerate(replies[len(homes) :]):
        dead = [m.decode() for m in body(reply)]
        found.update((id, home) for id in dead)
        if len(dead) > limit and (cut is None or dead[-1] < cut):
            cut = dead[-1]
    ids = sorted(id for id in found if cut is None or id <= cut)
    more = cut is not None or len(ids) > limit
    ids = ids[:limit]

    by_home: dict[int, list[str]] = {}
    for id in ids:
        by_home.setdefault(found[id], []).append(id)
    records = await read(runner, info, by_home)
    messages: list[Message] = sorted(
        (m for m in records if m is not None and m.bucket == bucket), key=lambda m: m.id
    )
    return ScanPage(messages, ids[-1] if more and ids else None)


def _stamp(info: TopicEntry, home: int, bucket: int) -> Call:
    return Call(None, (), ("HGET", info.slot(home).entered, bucket))


async def _order(runner: Runner, info: TopicEntry, bucket: int, homes: tuple[int, ...]) -> IdOrder:
    """The bucket's live ids sorted, each home's count read before its ids: a
    member added in between makes the next page read them again, never miss it."""
    heads = await runner.run(
        [Call(None, (), ("ZRANGE", info.slot(h).heads, 0, -1)) for h in homes], durable=False
    )
    calls: list[Call] = []
    reads: list[int | None] = []  # per call: the home whose ids it reads (None: a stamp)
    for h, lanes in zip(homes, heads, strict=True):
        calls.append(_stamp(info, h, bucket))
        reads.append(None)
        # The bucket's timeline and its keys' lanes (keys.lane) that hold anything.
        mine = [x.decode() for x in lanes if b":" in x and keys.lane_bucket(x) == bucket]
        for lane in [keys.lane(bucket), *mine]:
            calls.append(Call(None, (), ("ZRANGE", info.slot(h).timeline(lane), 0, -1)))
            reads.append(h)
    replies = await runner.run(calls, durable=False)
    stamps = [r for r, h in zip(replies, reads, strict=True) if h is None]
    pairs = sorted(
        (member.decode(), h)
        for r, h in zip(replies, reads, strict=True)
        if h is not None
        for member in r
    )
    return IdOrder(homes, tuple(stamps), [id for id, _ in pairs], [home for _, home in pairs])
