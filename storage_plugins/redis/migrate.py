"""Upgrading a ``redis://`` store in place to this dejaq's layout (``keys``).

Version 1 kept a hash ``m:<id>`` and a string ``p:<id>`` a message; version 2
keeps them as fields of the slot's ``records`` and ``payloads`` hashes. The
upgrade walks every topic's slots: the ids on the slot's timelines (its
``heads`` name them, strays included) and on its dead timeline, in chunks of
``CHUNK``, each chunk one script (``upgrade.lua``) that moves what it finds and
skips what was moved already. Sorted sets, tombstones, the registry and the
topics' other keys hold the same in both versions, but version 2 names a slot
by a tag that places it in its share of the hash slots (``keys.tags``): a slot
whose tag changed has each of its keys copied to the new name (DUMP, RESTORE
... REPLACE) and then deleted, one key at a time, since on a cluster the two
names may be on different masters. Its timelines go first, ``heads`` (which
names them) and ``alive`` last, so a run cut short finds the rest where it
left it; a slot whose old ``alive`` is gone was moved whole. ``keys.FORMAT``
is set to the new version last: an upgrade cut short leaves the store at
version 1, and is run again. No broker may write the store meanwhile (the
README's upgrade steps).

Version 3 adds keys, their lanes and headers (``keys``, ``record``): a version
2 record and timeline read the same in version 3 (no key, no lane, no
headers), so a version 2 store is upgraded by setting the version alone.

Version 4 keeps a slot's tombstones as fields of ``records`` and the list
``graves`` instead of the sorted set ``tombs`` (``keys``): the upgrade moves
each slot's, oldest first, ``CHUNK`` a script (``upgrade_tombs.lua``), which
removes what it moved, so a run cut short carries on where it stopped.

Version 5 keeps a slot's leases as grants (``keys``: ``grants``, ``granted``
and a list of ids a grant) instead of the sorted set ``owned``: the upgrade
moves each slot's leased ids to the grants their records name, ``CHUNK`` a
script (``upgrade_grants.lua``), which removes what it moved.
"""

from __future__ import annotations

from collections.abc import Callable

from dejaq.core.errors import StorageError
from dejaq.storage_plugins.redis import keys
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.registry import Registry, TopicEntry
from dejaq.storage_plugins.redis.replies import body, text
from dejaq.storage_plugins.redis.scripts import Call, Runner, Script

CHUNK = 500  # ids a script: bounds how long one blocks the server


async def stored_version(runner: Runner) -> int | None:
    """The store's format version; None for a store no broker has opened."""
    stored = text(await runner.command("GET", keys.FORMAT))
    if stored is None:
        return None
    try:
        return int(stored)
    except ValueError:
        raise StorageError(
            f"redis: the stored format version is {stored!r}, not a number"
        ) from None


async def upgrade(runner: Runner, registry: Registry) -> tuple[int | None, int]:
    """Bring the store to ``keys.FORMAT_VERSION``: (the version before, messages moved)."""
    before = await stored_version(runner)
    if before is not None and before > keys.FORMAT_VERSION:
        raise StorageError(
            f"redis: the store holds dejaq's stored format version {before}, newer than"
            f" {keys.FORMAT_VERSION}: run a dejaq that reads it"
        )
    moved = 0
    if before is not None and before < keys.FORMAT_VERSION:
        for topic in await registry.all():
            info = await registry.load(topic.name)
            if info is None:
                continue
            if before == 1:
                moved += await _upgrade_topic(runner, info)
            await _bury_again(runner, info)
            await _grant_again(runner, info)
    await runner.command("SET", keys.FORMAT, str(keys.FORMAT_VERSION))
    return before, moved


async def _upgrade_topic(runner: Runner, info: TopicEntry) -> int:
    moved = 0
    for index in range(info.slots):
        s = keys.Slot.format1(info.topic.name, index, info.slots)
        if not await runner.command("EXISTS", s.alive):
            continue  # moved to its new tag whole by an earlier run
        buckets = await runner.command("ZRANGE", s.heads, 0, -1)
        timelines = [s.timeline(int(b)) for b in buckets]
        ids: list[str] = []
        for members in await runner.run(
            [Call(None, (), ("ZRANGE", k, 0, -1)) for k in [*timelines, s.dead]]
        ):
            ids += [m.decode() for m in members]
        for at in range(0, len(ids), CHUNK):
            args = (info.gen, s.prefix, *ids[at : at + CHUNK])
            [reply] = await runner.run([Call(lua.UPGRADE, (s.alive,), args)])
            (count,) = body(reply)
            moved += int(count)
        new = info.slot(index)
        if new.prefix != s.prefix:
            for key in [*timelines, *_FIXED, keys.HEADS, keys.ALIVE]:
                await _rename(runner, key.removeprefix(s.prefix), s, new)
    return moved


async def _bury_again(runner: Runner, info: TopicEntry) -> None:
    """Move a topic's tombstones from version 3's ``tombs`` to version 4's place."""
    await _each_slot_in_chunks(runner, info, lua.UPGRADE_TOMBS, lambda s: (s.tombs, s.graves))


async def _grant_again(runner: Runner, info: TopicEntry) -> None:
    """Move a topic's leases from format 4's ``owned`` to version 5's grants."""
    await _each_slot_in_chunks(runner, info, lua.UPGRADE_GRANTS, lambda s: (s.owned, s.grants))


async def _each_slot_in_chunks(
    runner: Runner,
    info: TopicEntry,
    script: Script,
    keys_of: Callable[[keys.Slot], tuple[str, ...]],
) -> None:
    """Run an upgrade ``script`` (KEYS: alive, then ``keys_of`` the slot; ARGV: gen,
    prefix, chunk; reply {OK, moved, left} or {GONE}) on each slot of a topic
    until it has nothing left there."""
    for s in map(info.slot, range(info.slots)):
        left = 1
        while left:
            args = (info.gen, s.prefix, CHUNK)
            [reply] = await runner.run([Call(script, (s.alive, *keys_of(s)), args)])
            if reply[0] == lua.GONE:
                break  # the topic was deleted meanwhile
            _, left = body(reply)


# A slot's keys besides its timelines, ``heads`` and ``alive``.
_FIXED = (
    keys.OWNED, keys.DEAD, keys.DEAD_IDS, keys.STRAY_HOMES, keys.ENTERED,
    keys.RECORDS, keys.PAYLOADS, keys.TOMBS, keys.WAITS,
)  # fmt: skip


async def _rename(runner: Runner, suffix: str, old: keys.Slot, new: keys.Slot) -> None:
    """Move one key of slot ``old`` to the same suffix under ``new``'s tag."""
    dumped = await runner.command("DUMP", old.prefix + suffix)
    if dumped is None:
        return  # never written, or moved already
    await runner.command("RESTORE", new.prefix + suffix, 0, dumped, "REPLACE")
    await runner.command("DEL", old.prefix + suffix)
