"""The topic registry: which topics exist, in which incarnation, over how many slots.

``keys.TOPICS`` maps a name to JSON of its settings, creation time, generation
and slot count. Each process caches what it read; every script checks the
generation in its slot (``alive``), so a stale cache is caught, read again and
the call tried once more (``on_topic``).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from dejaq.core.buckets import Buckets, bucket_of
from dejaq.core.errors import AlreadyExists, NotFound, StorageError
from dejaq.core.model import KIND_PRIORITY, Topic, TopicSettings
from dejaq.storage_plugins.redis import keys
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.keys import Slot
from dejaq.storage_plugins.redis.replies import TopicChanged, body
from dejaq.storage_plugins.redis.scripts import Call, Runner

T = TypeVar("T")
_UPDATE_TRIES = 5


@dataclass(frozen=True, slots=True)
class TopicEntry:
    """A topic as registered: its generation picks out this incarnation of the
    name; bucket ``b`` lives in slot ``b * slots // buckets``."""

    topic: Topic
    gen: str
    slots: int
    entry: bytes  # the registry value, compared before deleting it

    @property
    def buckets(self) -> int:
        return self.topic.settings.buckets

    def slot(self, index: int) -> Slot:
        return Slot(self.topic.name, index, self.slots)

    def slot_of(self, bucket: int) -> int:
        return bucket * self.slots // self.buckets

    def home(self, id: str) -> int:
        """The slot that holds message ``id``."""
        return self.slot_of(bucket_of(id, self.buckets))

    def wanted(self, buckets: Buckets) -> list[int]:
        """The asked buckets the topic has, each once, in order."""
        if buckets is None:
            return list(range(self.buckets))
        return sorted({b for b in buckets if 0 <= b < self.buckets})

    def slots_of(self, wanted: Sequence[int]) -> list[int]:
        """The slots of sorted ``wanted`` buckets, each once, in order."""
        return sorted({self.slot_of(b) for b in wanted})

    def asked(self, wanted: Sequence[int]) -> str:
        """Sorted ``wanted`` buckets as the scripts read them: '*' or 'lo-hi,...'."""
        if len(wanted) == self.buckets:
            return "*"
        ranges: list[list[int]] = []
        for b in wanted:
            if ranges and ranges[-1][1] == b - 1:
                ranges[-1][1] = b
            else:
                ranges.append([b, b])
        return ",".join(f"{lo}-{hi}" for lo, hi in ranges)

    def optional(self, s: Slot) -> tuple[str, ...]:
        """The scripts' optional last keys for slot ``s`` (found by name): its
        ``waits`` on a priority topic, its tombstones when deletes leave
        tombstones (the topic has a dedup window)."""
        waits = (s.waits,) if self.topic.settings.kind == KIND_PRIORITY else ()
        return waits + ((s.graves,) if self.topic.settings.dedup_window_ms else ())

    def by_home(self, ids: Sequence[str]) -> dict[int, list[int]]:
        """Indexes of ``ids`` grouped by home slot, in their order."""
        if self.slots == 1:  # the default: no crc32 per id
            return {0: list(range(len(ids)))} if ids else {}
        groups: dict[int, list[int]] = {}
        for i, id in enumerate(ids):
            groups.setdefault(self.home(id), []).append(i)
        return groups


def encode(topic: Topic, gen: str, slots: int) -> bytes:
    settings = topic.settings.to_dict()
    entry = {"settings": settings, "created_at_ms": topic.created_at_ms, "gen": gen}
    return json.dumps({**entry, "slots": slots}).encode()


def decode(name: str, entry: bytes) -> TopicEntry:
    data = json.loads(entry)
    if "slots" not in data:
        raise StorageError(
            f"redis: topic {name!r} was stored by an older dejaq (one slot per bucket,"
            " no heads index): delete and create it again"
        )
    topic = Topic(name, TopicSettings.from_dict(data["settings"]), data["created_at_ms"])
    return TopicEntry(topic, data["gen"], data["slots"], entry)


class Registry:
    """Reads and writes ``keys.TOPICS``, with this process's cache of it."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self._cache: dict[str, TopicEntry] = {}

    async def load(self, name: str) -> TopicEntry | None:
        """Read a topic from the registry (and cache it)."""
        entry = await self._runner.command("HGET", keys.TOPICS, name, durable=False)
        if entry is None:
            self._cache.pop(name, None)
            return None
        info = self._cache[name] = decode(name, entry)
        return info

    async def on_topic(self, name: str, op: Callable[[TopicEntry], Awaitable[T]]) -> T:
        """Run ``op`` with the topic's cached registration; when a script finds it
        stale, read it again and run ``op`` once more if the topic was re-created."""
        info = self._cache.get(name) or await self.load(name)
        if info is not None:
            try:
                return await op(info)
            except TopicChanged:
                fresh = await self.load(name)
                if fresh is not None and fresh.gen != info.gen:
                    try:
                        return await op(fresh)
                    except TopicChanged:
                        pass
                self._cache.pop(name, None)  # being deleted or created: ask again next time
        raise NotFound(f"topic {name!r} does not exist")

    async def create(self, topic: Topic, slots: int) -> TopicEntry:
        gen = secrets.token_hex(8)
        slots = max(1, min(slots, topic.settings.buckets))
        entry = encode(topic, gen, slots)
        if not await self._runner.command("HSETNX", keys.TOPICS, topic.name, entry):
            raise AlreadyExists(f"topic {topic.name!r} already exists")
        info = TopicEntry(topic, gen, slots, entry)
        await self._runner.run(
            [Call(None, (), ("SET", info.slot(i).alive, gen)) for i in range(slots)]
        )
        self._cache[topic.name] = info
        return info

    async def delete(self, name: str) -> None:
        info = await self.load(name)
        if info is None:
            raise NotFound(f"topic {name!r} does not exist")
        # Slots first, the registry entry last: an interrupted delete leaves the
        # name taken and its slots refusing calls, and can simply be repeated.
        calls = []
        for i in range(info.slots):
            s = info.slot(i)
            k = (s.alive, s.heads, s.grants, s.dead, s.dead_ids, s.stray_homes, s.graves, s.waits)
            calls.append(Call(lua.DROP, k, (info.gen, s.prefix)))
        await self._runner.run(calls)
        await self._runner.run([Call(lua.FORGET, (keys.TOPICS,), (name, info.entry))])
        self._cache.pop(name, None)

    async def update(self, topic: Topic) -> bool:
        """New settings for this incarnation of the topic: replaced only if the entry
        is still the one read (a concurrent update reads again and retries)."""
        for _ in range(_UPDATE_TRIES):
            info = await self.load(topic.name)
            if info is None or info.topic.created_at_ms != topic.created_at_ms:
                return False
            entry = encode(topic, info.gen, info.slots)
            call = Call(lua.REPLACE, (keys.TOPICS,), (topic.name, info.entry, entry))
            (reply,) = await self._runner.run([call])
            if body(reply)[0]:
                self._cache[topic.name] = TopicEntry(topic, info.gen, info.slots, entry)
                return True
        raise StorageError(f"redis: topic {topic.name!r} kept changing while being updated")

    async def all(self) -> list[Topic]:
        entries = await self._runner.command("HGETALL", keys.TOPICS, durable=False)
        return [decode(name.decode(), entry).topic for name, entry in entries.items()]


async def per_slot(
    runner: Runner,
    info: TopicEntry,
    call: Callable[[Slot], Call],
    indexes: Sequence[int] | None = None,
    durable: bool = True,
) -> list[list[Any]]:
    """One script per slot (every slot of the topic by default); their reply
    bodies (``durable``: as ``Runner.run``)."""
    slots = [info.slot(i) for i in (range(info.slots) if indexes is None else indexes)]
    replies = await runner.run([call(s) for s in slots], durable=durable)
    return [body(reply) for reply in replies]
