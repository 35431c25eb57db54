"""Lease passes and next_due: a bounded number of scripts however many buckets.

Within one slot a script merges the slot's timelines itself, walking the
slot's ``heads`` index (bucket -> earliest timestamp) in time order, so a
lease or next_due over buckets of one slot — every bucket, with the default
single slot — is one script in one round trip, and next_due reads one entry
of ``heads``.

Over several slots (``topic_slots`` > 1, or strays), in time order without
over-leasing: one round trip *peeks* each slot (its count of due messages of
the asked buckets and their first few due timestamps), the merge of those
samples picks how many to take from each slot and a bound below which the merge
is exact, and a second round trip runs the lease scripts. When a slot had more
due than sampled, another round follows (rarely: the sample is 4x each slot's
fair share). So a pass costs O(slots asked) scripts, never O(buckets).

Under a steady load that is two round trips a pass where one does: when the
last pass over a topic's slots took everything due, the next one sends each
slot its share of the limit (``_shares``) in one round trip, lease scripts
only. No slot filling its share means every due message was taken: the pass is
exact. A slot that fills it means a backlog built up since: that pass takes
the rest of its limit by peek-and-plan, so its first shares (each slot's
earliest) may hold later messages than some left in a full slot, and the
passes after it merge exactly until one takes everything due again. A topic
found holding strays, and a priority topic, always merge.

A priority topic's pass first promotes (``promote``): the messages of the
asked buckets that became available (timestamps from 0 to now; ranks are
negative) move to their rank, oldest first, by the same walk and, over several
slots, the same peek-and-plan rounds, found through the slot's ``waits`` index
instead of ``heads`` (``keys``): timelines holding only ranks are never read.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from dejaq.core import priority
from dejaq.core.buckets import Buckets
from dejaq.core.errors import DejaqError, InvalidArgument, StorageUnavailable
from dejaq.core.model import KIND_PRIORITY, LeasedMessage, Leases
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import columns, fair
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.keys import Slot
from dejaq.storage_plugins.redis.registry import TopicEntry
from dejaq.storage_plugins.redis.replies import body, ints
from dejaq.storage_plugins.redis.scripts import Call, Late, Runner

# Peek 4x a slot's fair share of a lease: measured on 64 timelines of uniformly
# spread due times, 2x needed a second round for almost every lease (3x slower).
SAMPLE_SLACK = 4
MAX_LEASE_ROUNDS = 16  # a bound, should concurrent leasers keep taking what we planned

Taken = list[tuple[int, LeasedMessage]]  # (bucket, delivery)

# Topics (name, generation) whose last multi-slot pass in this process took
# everything due, so the next takes each slot's share in one round trip; and
# topics found holding strays (never: their passes merge).
_DRAINED: set[tuple[str, str]] = set()
_STRAYS: set[tuple[str, str]] = set()
# Topics whose last multi-slot pass found keys due: their passes share among
# keys across the slots (``_fair``) until one finds none.
_KEYED: set[tuple[str, str]] = set()
MAX_REMEMBERED = 10_000
# Hand-backs of leases that came late, under way (referenced until they end).
_HANDING_BACK: set[asyncio.Task[None]] = set()
log = logging.getLogger(__name__)


class Span(NamedTuple):
    """The scores a pass takes, from ``low`` up to its bound, and ``key``: the
    slot's index that finds them (bucket -> a lower bound of its first one)."""

    low: str
    key: Callable[[Slot], str]


# A lease takes any due score, found by ``heads``; a promote the timestamps of
# messages not yet ranked (ranks are negative: core.priority), by ``waits``.
DUE = Span("-inf", lambda s: s.heads)
AVAILABLE = Span("0", lambda s: s.waits)


class Peek(NamedTuple):
    due: int  # members of the asked timelines with a score in the peek's range
    homes: list[int]  # other slots holding strays of this slot's buckets
    scores: list[int]  # the first few of those scores, in order
    keyed: bool = False  # a key's lane among them: the pass shares among keys (``_fair``)


async def lease(runner: Runner, info: TopicEntry, request: LeaseRequest) -> Leases:
    """One lease pass (see the module docstring for its cost)."""
    wanted = info.wanted(request.buckets)
    slots, asked = info.slots_of(wanted), info.asked(wanted)
    bound, limit, until = request.bound, request.limit, request.until
    if len(slots) == 1:  # no merge to plan, unless strays live in other slots
        solo = await _take(runner, info, request, asked, {slots[0]: limit}, bound, solo=True)
        if solo is not None:
            return _leases(solo[0], until, solo[1])
    out: Taken = []
    dead = 0
    key = (info.topic.name, info.gen)

    async def fair(remaining: int) -> int:
        nonlocal dead
        taken, died, keyed = await _fair(runner, info, request, asked, slots, remaining)
        out.extend(taken)
        dead += died
        if not keyed:
            _KEYED.discard(key)
        return len(taken)

    if key in _KEYED and not _ranked(info):
        await fair(limit)
        return _leases(out, until, dead)
    if len(slots) > 1 and limit >= len(slots) and key in _DRAINED and not _ranked(info):
        # The last pass took everything due: take each slot's share at once.
        quotas = _shares(slots, limit)
        each, failed = await _take_each(
            runner, info, request, asked, quotas, bound, solo=True, shares=True
        )
        full = False
        for index, taken in each.items():
            if taken is None:  # strays of its buckets live elsewhere: merge from now on
                _STRAYS.add(key)
                continue
            if taken is KEYED_REFUSAL:  # keys are due: share among them from now on
                _remember(_KEYED, key)
                continue
            out += taken[0]
            dead += taken[1]
            full = full or len(taken[0]) >= quotas[index]
        if key in _KEYED and not failed:
            _DRAINED.discard(key)
            await fair(limit - len(out))
            return _leases(out, until, dead)
        if failed or (not full and key not in _STRAYS):
            # Everything due was in the shares, or some slots' masters failed
            # their part: the others' leases stand, the next pass looks again.
            return _leases(out, until, dead)
        _DRAINED.discard(key)
        if len(out) >= limit:
            return _leases(out, until, dead)
        limit -= len(out)

    async def take(quotas: dict[int, int], exact: int) -> int:
        nonlocal dead
        each, failed = await _take_each(runner, info, request, asked, quotas, exact, False)
        got = 0
        for taken in each.values():
            assert taken is not None
            out.extend(taken[0])
            dead += taken[1]
            got += len(taken[0])
        # A master failed its part: keep what the others leased, merge no further.
        return limit if failed else got

    async def keyed() -> int:
        _remember(_KEYED, key)
        _DRAINED.discard(key)
        return await fair(limit)

    got = await _merged(runner, info, slots, asked, DUE, bound, limit, take, keyed)
    if got < limit and key not in _STRAYS and key not in _KEYED:
        _remember(_DRAINED, key)
    return _leases(out, until, dead)


async def _fair(
    runner: Runner,
    info: TopicEntry,
    request: LeaseRequest,
    asked: str,
    slots: Sequence[int],
    limit: int,
) -> tuple[Taken, int, bool]:
    """A fair pass over several slots (base.py: fair lease passes): each slot's
    due count and earliest per key (``keys_due.lua``, and the slots holding
    strays), the keys' shares of ``limit`` (``fair.shares``); for a key due in
    several slots, its first due timestamps in each (``keys_sample.lua``),
    merged, say how many each slot gives; then every slot's lease script takes
    its keys' counts as caps. Three round trips (two when no key spans slots):
    (deliveries, dead lettered, whether any key but "" was due)."""
    bound = request.bound
    loads = await _keys_due(runner, info, slots, asked, bound)
    totals: dict[str, tuple[int, int]] = {}
    for by_key in loads.values():
        for k, (n, first) in by_key.items():
            had = totals.get(k)
            totals[k] = (n, first) if had is None else (had[0] + n, min(had[1], first))
    keyed = bool(totals) and set(totals) != {""}
    wanted = fair.shares(totals, limit, request.caps)
    plan: dict[int, dict[str, int]] = {index: {} for index in loads}
    sample: dict[int, dict[str, int]] = {}
    for k, share in wanted.items():
        holders = [index for index, by_key in loads.items() if k in by_key]
        if len(holders) == 1:
            plan[holders[0]][k] = share
        else:
            for index in holders:
                sample.setdefault(index, {})[k] = min(share, loads[index][k][0])
    if sample:
        scores = await _key_samples(runner, info, sample, asked, bound)
        for k, share in wanted.items():
            merged = sorted(
                (t, index) for index, by_key in scores.items() for t in by_key.get(k, [])
            )
            for index, n in Counter(index for _, index in merged[:share]).items():
                plan[index][k] = n
    quotas = {index: sum(p.values()) for index, p in plan.items() if sum(p.values())}
    if not quotas:
        return [], 0, keyed
    # Every key due in a slot is capped there (0: none from this slot).
    caps = {index: {k: plan[index].get(k, 0) for k in loads[index]} for index in quotas}
    each, _ = await _take_each(runner, info, request, asked, quotas, bound, False, caps=caps)
    taken: Taken = []
    dead = 0
    for t in each.values():
        if t is not None and t is not KEYED_REFUSAL:
            taken += t[0]
            dead += t[1]
    return taken, dead, keyed


async def _keys_due(
    runner: Runner, info: TopicEntry, slots: Sequence[int], asked: str, bound: int
) -> dict[int, dict[str, tuple[int, int]]]:
    """Per slot (those asked, then the homes of their strays), per key with due
    messages: (due count, earliest)."""
    out: dict[int, dict[str, tuple[int, int]]] = {}
    todo, homes = list(slots), True
    while todo:
        calls = []
        for index in todo:
            s = info.slot(index)
            args = (info.gen, s.prefix, bound, asked, "1" if homes else "0")
            calls.append(Call(lua.KEYS_DUE, (s.alive, s.heads, s.stray_homes), args))
        found: set[int] = set()
        for index, reply in zip(todo, await runner.run_each(calls, durable=False), strict=True):
            if isinstance(reply, StorageUnavailable):
                continue  # its master failed: its keys wait for the next pass
            strays, names, packed = body(reply)
            found.update(ints(strays))
            numbers = ints(packed)
            out[index] = {
                name.decode(): (numbers[2 * i], numbers[2 * i + 1]) for i, name in enumerate(names)
            }
        todo, homes = sorted(found - set(out) - set(slots)), False
    return out


async def _key_samples(
    runner: Runner, info: TopicEntry, wanted: dict[int, dict[str, int]], asked: str, bound: int
) -> dict[int, dict[str, list[int]]]:
    """Per slot, per key asked, its first due timestamps there, up to the count asked."""
    calls = []
    for index, counts in wanted.items():
        s = info.slot(index)
        args = (info.gen, s.prefix, bound, asked, *columns.texts(counts))
        calls.append(
            Call(lua.KEYS_SAMPLE, (s.alive, s.heads), (*args, columns.decimals(counts.values())))
        )
    out: dict[int, dict[str, list[int]]] = {}
    replies = await runner.run_each(calls, durable=False)
    for (index, counts), reply in zip(wanted.items(), replies, strict=True):
        if isinstance(reply, StorageUnavailable):
            continue
        sizes, packed = body(reply)
        scores, at = ints(packed), 0
        out[index] = {}
        for k, n in zip(counts, ints(sizes), strict=True):
            out[index][k] = scores[at : at + n]
            at += n
    return out


def _ranked(info: TopicEntry) -> bool:
    """A priority topic: its passes always merge, so no pass takes a lower
    priority ahead of a higher one."""
    return info.topic.settings.kind == KIND_PRIORITY


def _shares(slots: Sequence[int], limit: int) -> dict[int, int]:
    """``limit`` split over ``slots`` as evenly as it goes (each gets one at least)."""
    base, extra = divmod(limit, len(slots))
    return {slot: base + (1 if i < extra else 0) for i, slot in enumerate(slots)}


def _remember(topics: set[tuple[str, str]], key: tuple[str, str]) -> None:
    if len(topics) >= MAX_REMEMBERED:
        topics.clear()  # a bound on what is kept; a topic forgotten merges once again
    topics.add(key)


async def promote(runner: Runner, info: TopicEntry, buckets: Buckets, now: int, limit: int) -> int:
    """Rank up to ``limit`` messages that became available by ``now``, oldest
    first: one script per slot asked, as a lease pass."""
    topic = info.topic
    if topic.settings.kind != KIND_PRIORITY:
        raise InvalidArgument(f"topic {topic.name!r} is a timeline: it has no priorities")
    wanted = info.wanted(buckets)
    slots, asked = info.slots_of(wanted), info.asked(wanted)
    ranking = (priority.step(topic), topic.created_at_ms, priority.RANK_BASE)

    async def take(quotas: dict[int, int], bound: int, solo: bool = False) -> int | None:
        calls = []
        for index, quota in quotas.items():
            s = info.slot(index)
            args = (info.gen, s.prefix, quota, bound, "1" if solo else "0", asked, *ranking)
            keys_ = (s.alive, s.heads, s.grants, s.stray_homes, s.waits)
            calls.append(Call(lua.PROMOTE, keys_, args))
        promoted = 0
        for reply in await runner.run(calls, durable=False):
            if reply[0] == lua.STRAYS:
                return None
            promoted += body(reply)[0]
        return promoted

    if len(slots) == 1:
        solo = await take({slots[0]: limit}, now, solo=True)
        if solo is not None:
            return solo

    async def merged_take(quotas: dict[int, int], bound: int) -> int:
        return await take(quotas, bound) or 0

    return await _merged(runner, info, slots, asked, AVAILABLE, now, limit, merged_take)


async def next_due(runner: Runner, info: TopicEntry, buckets: Buckets) -> int | None:
    """The earliest head among the asked buckets: one script per slot asked (one
    read of ``heads`` each), and one more round only when strays live elsewhere.
    A master that fails its part (or does not answer in time) is left out: the
    dispatcher's next pass, or its re-scan, looks at its slots again."""
    wanted = info.wanted(buckets)
    slots, asked = info.slots_of(wanted), info.asked(wanted)
    heads: list[int] = []
    for extra in (False, True):
        calls = []
        for index in slots:
            s = info.slot(index)
            calls.append(Call(lua.NEXT_DUE, (s.alive, s.heads, s.stray_homes), (info.gen, asked)))
        homes: set[int] = set()
        for reply in await runner.run_each(calls, durable=False):
            if isinstance(reply, StorageUnavailable):
                continue  # its master failed its part: its slots are looked at by the next pass
            found_homes, head = body(reply)
            homes.update(ints(found_homes))
            if head:
                heads.append(int(head))
        if extra:
            break
        slots = sorted(homes - set(slots))
        if not slots:
            break
    return min(heads, default=None)


async def _merged(
    runner: Runner,
    info: TopicEntry,
    slots: Sequence[int],
    asked: str,
    span: Span,
    bound: int,
    limit: int,
    take: Callable[[dict[int, int], int], Awaitable[int]],
    keyed: Callable[[], Awaitable[int]] | None = None,
) -> int:
    """Over several slots, in score order over ``span`` up to ``bound``: peek, plan
    quotas, ``take(quotas, exact bound)`` (how many it took), in rounds until
    ``limit`` are taken or none is left; how many were taken. When the first
    peek finds a key's lane due, ``keyed()`` (a fair pass) runs instead."""
    got = 0
    peeks = await _survey(runner, info, slots, asked, span, str(bound), _sample(limit, len(slots)))
    if keyed is not None and any(p.keyed for p in peeks.values()):
        return await keyed()
    for _ in range(MAX_LEASE_ROUNDS):
        due = {slot: p for slot, p in peeks.items() if p.due}
        if not due:
            break
        quotas, exact, complete = _plan(due, limit - got, bound)
        got += await take(quotas, exact)
        if complete or got >= limit:
            break
        sample = _sample(limit - got, len(due))
        peeks = await _peek(runner, info, list(due), asked, span, str(bound), sample, False)
    return got


def _leases(taken: Taken, until: int, dead: int) -> Leases:
    # Ties as within one sorted set: by member (id bytes), then across buckets by bucket.
    taken.sort(key=lambda bd: (bd[1].timestamp, bd[0], bd[1].id.encode()))
    return Leases([d for _, d in taken], until, dead)


async def _take(
    runner: Runner,
    info: TopicEntry,
    request: LeaseRequest,
    asked: str,
    quotas: dict[int, int],
    bound: int,
    solo: bool = False,
) -> tuple[Taken, int] | None:
    """Run the lease script on each slot for its quota: (bucket, delivery) pairs
    and the dead-letter count; None when a solo call found strays elsewhere."""
    each, _ = await _take_each(runner, info, request, asked, quotas, bound, solo)
    if any(t is None for t in each.values()):
        return None
    delivered: Taken = []
    dead = 0
    for t in each.values():
        assert t is not None
        delivered += t[0]
        dead += t[1]
    return delivered, dead


async def _take_each(
    runner: Runner,
    info: TopicEntry,
    request: LeaseRequest,
    asked: str,
    quotas: dict[int, int],
    bound: int,
    solo: bool,
    shares: bool = False,
    caps: dict[int, dict[str, int]] | None = None,
) -> tuple[dict[int, tuple[Taken, int] | None], set[int]]:
    """``_take``, slot by slot: None for a slot that refused a solo call (strays);
    and the slots whose master failed its part (``Runner.run_each``), so a
    master that fails or hangs holds up only its own slots: what they leased,
    if anything, is not returned; a late answer's leases are handed back at
    once, the others' come back when their lease runs out. ``shares``: each
    quota is a share of a pass that does not share among keys; a slot with
    keys due refuses (``KEYED_REFUSAL``). ``caps``: per slot, the caps its
    script applies instead of the request's."""
    calls = []
    for index, quota in quotas.items():
        s = info.slot(index)
        args = (info.gen, s.prefix, request.now, quota, bound, request.until, request.owner)
        calls.append(
            Call(
                lua.LEASE,
                (s.alive, s.heads, s.grants, s.dead, s.dead_ids, s.stray_homes, *info.optional(s)),
                (
                    *args,
                    request.max_deliveries,
                    "1" if solo else "0",
                    asked,
                    *_caps(request.caps if caps is None else caps.get(index)),
                    "1" if shares else "0",
                ),
            )
        )
    out: dict[int, tuple[Taken, int] | None] = {}
    failed: set[int] = set()
    late = _hand_back_late(runner, info, request.owner)
    replies = await runner.run_each(calls, durable=False, late=late)
    for index, reply in zip(quotas, replies, strict=True):
        if isinstance(reply, StorageUnavailable):
            failed.add(index)
            out[index] = ([], 0)
        else:
            out[index] = _delivered(reply)
    return out, failed


def _caps(caps: Mapping[str, int] | None) -> tuple[bytes, str, str]:
    """Caps as the lease script's columns: keys, their lengths, the numbers."""
    caps = caps or {}
    return (*columns.texts(caps), columns.decimals(caps.values()))


# A lease script's answer to a share of a pass that found keys due.
KEYED_REFUSAL: tuple[Taken, int] = ([], 0)


def _delivered(reply: list[Any]) -> tuple[Taken, int] | None:
    """A lease script's (bucket, delivery) pairs and dead-letter count; None
    for a solo call refused (strays), ``KEYED_REFUSAL`` for a share refused."""
    if reply[0] == lua.STRAYS:
        return None
    if reply[0] == lua.KEYED:
        return KEYED_REFUSAL
    died, numbers, blob = body(reply)
    delivered: Taken = []
    at = 0
    items = np.frombuffer(numbers, "<f8").astype(np.int64).reshape(-1, lua.LEASED_ITEM)
    for bucket, ts, version, deliveries, priority_, id_len, size, klen, hlen in items.tolist():
        id = blob[at : at + id_len].decode()
        at += id_len
        payload = blob[at : at + size]
        at += size
        key = blob[at : at + klen].decode()
        at += klen
        headers = blob[at : at + hlen]
        at += hlen
        delivered.append(
            (bucket, LeasedMessage(id, ts, payload, version, deliveries, priority_, key, headers))
        )
    return delivered, died


def _hand_back_late(runner: Runner, info: TopicEntry, owner: str) -> Late:
    """What to do with a lease reply that came after the pass gave up on its
    master (``ClusterRunner.run_each``): nobody got those messages, so they go
    back on their timelines at their own time at once (a settle "back", as a
    consumer's goodbye hands back), instead of waiting for the lease to run out."""

    def late(_: int, reply: Any) -> None:
        taken = _delivered(reply)
        if not taken or not taken[0]:
            return
        messages = [m for _, m in taken[0]]
        calls = []
        for home, indexes in info.by_home([m.id for m in messages]).items():
            s = info.slot(home)
            mine = [messages[i] for i in indexes]
            args: list[lua.Arg] = [info.gen, s.prefix, "back", owner, 0, 0]
            args += columns.texts(m.id for m in mine)
            args.append(columns.decimals(m.version for m in mine))
            args.append(columns.decimals(m.timestamp for m in mine))
            keys_ = (s.alive, s.heads, s.grants, s.dead, s.dead_ids, *info.optional(s))
            calls.append(Call(lua.SETTLE, keys_, args))
        task = asyncio.create_task(_quietly(runner.run(calls, durable=False), len(messages)))
        _HANDING_BACK.add(task)
        task.add_done_callback(_HANDING_BACK.discard)

    return late


async def _quietly(hand_back: Awaitable[list[Any]], count: int) -> None:
    try:
        await hand_back
    except DejaqError as exc:  # they come back when their lease runs out
        log.warning("redis: could not hand back %d late leases: %s", count, exc)


async def _survey(
    runner: Runner,
    info: TopicEntry,
    slots: Sequence[int],
    asked: str,
    span: Span,
    max_score: str,
    sample: int,
) -> dict[int, Peek]:
    """Peek ``slots``, then the other slots that hold strays of their buckets."""
    peeks = await _peek(runner, info, slots, asked, span, max_score, sample, with_homes=True)
    strays = sorted({home for p in peeks.values() for home in p.homes} - set(slots))
    if strays:
        peeks.update(await _peek(runner, info, strays, asked, span, max_score, sample, False))
    return peeks


async def _peek(
    runner: Runner,
    info: TopicEntry,
    slots: Sequence[int],
    asked: str,
    span: Span,
    max_score: str,
    sample: int,
    with_homes: bool,
) -> dict[int, Peek]:
    calls = []
    for index in slots:
        s = info.slot(index)
        homes = "1" if with_homes else "0"
        args = (info.gen, s.prefix, max_score, sample, homes, asked, span.low)
        calls.append(Call(lua.PEEK, (s.alive, span.key(s), s.stray_homes), args))
    peeks = {}
    for index, reply in zip(slots, await runner.run_each(calls, durable=False), strict=True):
        if isinstance(reply, StorageUnavailable):  # its master failed: leased from later
            peeks[index] = Peek(0, [], [])
            continue
        due, homes, scores, keyed = body(reply)
        peeks[index] = Peek(due, ints(homes), ints(scores), keyed == 1)
    return peeks


def _sample(remaining: int, slots: int) -> int:
    """How many due timestamps to peek per slot for a lease of ``remaining``."""
    return min(remaining, SAMPLE_SLACK * math.ceil(remaining / max(slots, 1)) + 1)


def _plan(due: dict[int, Peek], remaining: int, bound: int) -> tuple[dict[int, int], int, bool]:
    """Quotas per slot, the timestamp bound, and whether that is everything due.

    Below the *horizon* — the last sampled score of any slot that had more due
    than sampled — every due timestamp was sampled, so merging the samples
    there gives the exact earliest ``remaining`` (ties in any order).
    """
    if sum(p.due for p in due.values()) <= remaining:
        return {slot: p.due for slot, p in due.items()}, bound, True
    horizon = min((p.scores[-1] for p in due.values() if p.due > len(p.scores)), default=bound)
    merged = sorted((score, s) for s, p in due.items() for score in p.scores if score <= horizon)
    return dict(Counter(slot for _, slot in merged[:remaining])), horizon, False
