"""``redis://`` — the served in-memory backend: one Redis server (6.2 or newer).

URL: ``redis://[[user]:password@]host[:port][/db]`` with options:

- ``wait_replicas=N`` (default 0): an insert also waits (``WAIT``) until N
  replicas have it, and raises ``StorageUnavailable`` when fewer acknowledge
  within ``wait_timeout_ms`` (default 1000). The write may still be on the
  primary: a retried produce then finds those ids as duplicates (produce is
  idempotent by id).
- ``socket_timeout_ms=5000``, ``connect_timeout_ms=2000``: a dead or hung
  server fails a call with ``StorageUnavailable`` instead of hanging it. Calls
  are never retried by the client: a lease or insert sent twice is not the same
  as once; the broker retries whole calls.

Durability is the server's: ``appendonly yes`` with ``appendfsync always``
keeps every acknowledged call through a crash of the server, ``everysec`` may
lose the last second, no persistence loses everything on restart.

Layout and Redis Cluster slotting: ``keys`` (every key of one topic
bucket shares the hash tag ``{topic:bucket}``). Each call is one Lua script
per bucket (``scripts``), atomic in that bucket. A call over several
buckets is atomic per bucket, except ``insert``, whose per-bucket scripts go
in one MULTI / EXEC: a batch is stored whole or (connection lost) not at all.

Lease across buckets, in time order without over-leasing: one round trip
*peeks* each timeline (its count of due messages and its first few due
timestamps), the merge of those samples picks how many to take from each
timeline and a bound below which the merge is exact, and a second round trip
runs the lease scripts. When a timeline had more due than sampled, another
round follows (rarely: the sample is 4x each timeline's fair share). A
lease of one bucket is a single round trip.

Costs, per call: insert, settle, move, get — one script per bucket touched,
O(log n) per message. lease / next_due — one peek per asked bucket (plus the
lease scripts). counts — one script per bucket doing a few ZCARD / ZCOUNT, no
record read: O(buckets x log n). release — per bucket, reads the records of
the leased messages (the ``owned`` set) only. list_dead — up to ``limit`` ids
from every bucket, then the records of the first ``limit``. redrive-all,
purge, delete_topic — one script per bucket, linear in what they change
(delete_topic blocks the server for as long as one bucket takes to delete).

Measured (``benchmarks/redis_baseline.py``, CPU per message, client + server):
insert ~6 + 8 us; lease of 100 from 1 bucket ~3 + 14 us; leases of 100 over 64
buckets ~35 + 31 us (two calls per bucket per lease dominate), of 1,000 ~8 + 18
us. The hand-rolled sorted-set queue (no versions, leases or dead letters)
takes ~3 + 2.6 us to insert and ~5 + 2 us to pop.
"""

from __future__ import annotations

import dataclasses
import json
import math
import secrets
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from dejaq.core.buckets import Buckets, bucket_of
from dejaq.core.errors import (
    AlreadyExists,
    DejaqError,
    InvalidArgument,
    NotFound,
    StorageError,
)
from dejaq.core.model import (
    Counts,
    Delivery,
    InsertStatus,
    Leases,
    Message,
    NewMessage,
    Settled,
    Topic,
    TopicSettings,
)
from dejaq.storage_plugins.base import LeaseRequest, Outcome, SettleItem, Storage
from dejaq.storage_plugins.redis import keys
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.keys import Slot
from dejaq.storage_plugins.redis.scripts import Call, Runner
from dejaq.storage_plugins.rules import check_holder, check_movable

T = TypeVar("T")
Timeline = tuple[int, int]  # (home slot, bucket): one timeline sorted set

# Peek 4x a timeline's fair share of a lease: measured on 64 buckets of uniformly
# spread due times, 2x needed a second round for almost every lease (3x slower).
SAMPLE_SLACK = 4
MAX_LEASE_ROUNDS = 16  # a bound, should concurrent leasers keep taking what we planned


@dataclass(frozen=True, slots=True)
class RedisOptions:
    """What a ``redis://`` URL says (see the module docstring for each option)."""

    url: str  # the server URL without dejaq's options
    wait_replicas: int = 0
    wait_timeout_ms: int = 1000
    socket_timeout_ms: int = 5000
    connect_timeout_ms: int = 2000


_OPTIONS = tuple(f.name for f in dataclasses.fields(RedisOptions) if f.name != "url")


def parse_url(url: str) -> RedisOptions:
    """Read a ``redis://host:port/db?option=value`` URL; ``InvalidArgument`` names what is wrong."""
    parts = urlsplit(url)
    db = parts.path.lstrip("/")
    if parts.scheme != "redis" or not parts.hostname or not (db == "" or db.isdigit()):
        raise InvalidArgument(f"expected redis://host:port/db, got {url!r}")
    values: dict[str, int] = {}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key not in _OPTIONS:
            raise InvalidArgument(f"unknown redis option {key!r}: expected one of {_OPTIONS}")
        if not value.isdigit() or (key != "wait_replicas" and int(value) == 0):
            raise InvalidArgument(f"bad value {value!r} for redis option {key!r}")
        values[key] = int(value)
    return RedisOptions(urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), **values)


class _TopicChanged(Exception):
    """A script found its slot's topic generation gone or different."""


@dataclass(frozen=True, slots=True)
class _Topic:
    """A topic as registered: its generation picks out this incarnation of the name."""

    topic: Topic
    gen: str
    entry: bytes  # the registry value, compared before deleting it

    @property
    def buckets(self) -> int:
        return self.topic.settings.buckets

    def slot(self, home: int) -> Slot:
        return Slot(self.topic.name, home)

    def home(self, id: str) -> int:
        return bucket_of(id, self.buckets)

    def wanted(self, buckets: Buckets) -> list[int]:
        """The asked buckets the topic has, each once."""
        if buckets is None:
            return list(range(self.buckets))
        return sorted({b for b in buckets if 0 <= b < self.buckets})

    def by_home(self, ids: Sequence[str]) -> dict[int, list[int]]:
        """Indexes of ``ids`` grouped by home slot, in their order."""
        groups: dict[int, list[int]] = {}
        for i, id in enumerate(ids):
            groups.setdefault(self.home(id), []).append(i)
        return groups


def _encode_topic(topic: Topic, gen: str) -> bytes:
    settings = dataclasses.asdict(topic.settings)
    return json.dumps(
        {"settings": settings, "created_at_ms": topic.created_at_ms, "gen": gen}
    ).encode()


def _decode_topic(name: str, entry: bytes) -> _Topic:
    data = json.loads(entry)
    topic = Topic(name, TopicSettings(**data["settings"]), data["created_at_ms"])
    return _Topic(topic, data["gen"], entry)


def _body(reply: list[Any]) -> list[Any]:
    """A script reply without its status; ``_TopicChanged`` when the topic is gone."""
    if reply[0] == lua.GONE:
        raise _TopicChanged
    return reply[1:]


def _str(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def _ints(packed: bytes) -> list[int]:
    """Numbers a script packed as ``'1,2,3'``."""
    return [int(n) for n in packed.split(b",")] if packed else []


def _groups(packed: bytes, width: int) -> list[tuple[int, ...]]:
    """Packed numbers in groups of ``width`` (one group per item)."""
    numbers = _ints(packed)
    return [tuple(numbers[i : i + width]) for i in range(0, len(numbers), width)]


class _Peek(NamedTuple):
    due: int  # members with a score <= the peek's maximum
    homes: list[int]  # slots holding strays of this bucket
    scores: list[int]  # the first few of those scores


@dataclass(frozen=True, slots=True)
class _LeaseArgs:
    now: int
    until: int
    owner: str
    max_deliveries: int


class RedisStorage(Storage):
    """The ``redis://`` backend (see the module docstring): construct with a URL,
    then ``open()``, which connects and loads the Lua scripts."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.options = parse_url(url)
        self._client: Redis | None = None
        self._runner_: Runner | None = None
        self._topics: dict[str, _Topic] = {}  # cache; scripts check it is still current
        o = self.options
        self._wait = (o.wait_replicas, o.wait_timeout_ms) if o.wait_replicas else None

    async def open(self) -> None:
        o = self.options
        timeout_ms = o.socket_timeout_ms
        if self._wait is not None:  # WAIT blocks the connection for up to its timeout
            timeout_ms = max(timeout_ms, o.wait_timeout_ms + 1000)
        self._client = Redis.from_url(
            o.url,
            socket_timeout=timeout_ms / 1000,
            socket_connect_timeout=o.connect_timeout_ms / 1000,
            retry=Retry(NoBackoff(), 0),
        )
        self._runner_ = Runner(self._client)
        try:
            await self._runner_.load()
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = self._runner_ = None

    async def healthy(self) -> bool:
        try:
            await self._command("PING")
        except StorageError:
            return False
        return True

    # -- plumbing -------------------------------------------------------------

    @property
    def _runner(self) -> Runner:
        if self._runner_ is None:
            raise StorageError("redis storage used before open()")
        return self._runner_

    async def _command(self, *args: lua.Arg) -> Any:
        [reply] = await self._runner.run([Call(None, (), args)])
        return reply

    async def _load_topic(self, name: str) -> _Topic | None:
        """Read a topic from the registry (and cache it)."""
        entry = await self._command("HGET", keys.TOPICS, name)
        if entry is None:
            self._topics.pop(name, None)
            return None
        info = self._topics[name] = _decode_topic(name, entry)
        return info

    async def _on_topic(self, name: str, op: Callable[[_Topic], Awaitable[T]]) -> T:
        """Run ``op`` with the topic's cached registration; when a script finds it
        stale, read it again and run ``op`` once more if the topic was re-created."""
        info = self._topics.get(name) or await self._load_topic(name)
        if info is not None:
            try:
                return await op(info)
            except _TopicChanged:
                fresh = await self._load_topic(name)
                if fresh is not None and fresh.gen != info.gen:
                    try:
                        return await op(fresh)
                    except _TopicChanged:
                        pass
                self._topics.pop(name, None)  # being deleted or created: ask again next time
        raise NotFound(f"topic {name!r} does not exist")

    async def _per_slot(
        self, info: _Topic, call: Callable[[Slot], Call], homes: Sequence[int] | None = None
    ) -> list[list[Any]]:
        """One script per slot (every slot of the topic by default); their reply bodies."""
        slots = [info.slot(h) for h in (range(info.buckets) if homes is None else homes)]
        return [_body(reply) for reply in await self._runner.run([call(s) for s in slots])]

    # -- topics ---------------------------------------------------------------

    async def _create_topic(self, topic: Topic) -> None:
        gen = secrets.token_hex(8)
        entry = _encode_topic(topic, gen)
        if not await self._command("HSETNX", keys.TOPICS, topic.name, entry):
            raise AlreadyExists(f"topic {topic.name!r} already exists")
        info = _Topic(topic, gen, entry)
        alive = [Call(None, (), ("SET", info.slot(h).alive, gen)) for h in range(info.buckets)]
        await self._runner.run(alive)
        self._topics[topic.name] = info

    async def _delete_topic(self, name: str) -> None:
        info = await self._load_topic(name)
        if info is None:
            raise NotFound(f"topic {name!r} does not exist")
        # Slots first, the registry entry last: an interrupted delete leaves the
        # name taken and its buckets refusing calls, and can simply be repeated.
        await self._per_slot(
            info,
            lambda s: Call(
                lua.DROP,
                (s.alive, s.owned, s.dead, s.dead_ids, s.stray_timelines, s.stray_homes),
                (info.gen, s.prefix, s.home),
            ),
        )
        await self._runner.run([Call(lua.FORGET, (keys.TOPICS,), (name, info.entry))])
        self._topics.pop(name, None)

    async def _get_topic(self, name: str) -> Topic | None:
        info = await self._load_topic(name)
        return info.topic if info is not None else None

    async def _list_topics(self) -> list[Topic]:
        entries = await self._command("HGETALL", keys.TOPICS)
        return [_decode_topic(name.decode(), entry).topic for name, entry in entries.items()]

    # -- insert ---------------------------------------------------------------

    async def _insert(self, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]:
        return await self._on_topic(topic, lambda info: self._insert_in(info, messages))

    async def _insert_in(self, info: _Topic, messages: Sequence[NewMessage]) -> list[InsertStatus]:
        groups = info.by_home([m.id for m in messages])
        strays: set[Timeline] = set()
        inserts = []
        for home, indexes in groups.items():
            s = info.slot(home)
            args: list[lua.Arg] = [info.gen, s.prefix, home]
            for i in indexes:
                m = messages[i]
                if not 0 <= m.bucket < info.buckets:
                    raise InvalidArgument(f"message {m.id!r}: bucket {m.bucket} is out of range")
                if m.bucket != home:
                    strays.add((home, m.bucket))
                args += (m.id, m.timestamp, m.bucket, m.max_deliveries, m.expires_at, m.payload)
            inserts.append(Call(lua.INSERT, (s.alive, s.stray_timelines), args))
        # Make strays findable from their bucket's slot before they exist.
        pointers = [
            Call(None, (), ("SADD", info.slot(bucket).stray_homes, home))
            for home, bucket in sorted(strays)
        ]
        replies = await self._runner.run(pointers + inserts, atomic=True, wait=self._wait)
        out = [InsertStatus.ACCEPTED] * len(messages)
        for indexes, reply in zip(groups.values(), replies[len(pointers) :], strict=True):
            for i, duplicate in zip(indexes, _body(reply), strict=True):
                if duplicate:
                    out[i] = InsertStatus.DUPLICATE
        return out

    # -- lease ----------------------------------------------------------------

    async def _lease(self, request: LeaseRequest) -> Leases:
        topic, buckets, now, limit = request.topic, request.buckets, request.now, request.limit
        lease_ms, owner, max_deliveries = request.lease_ms, request.owner, request.max_deliveries
        job = _LeaseArgs(now, now + lease_ms, owner, max_deliveries)
        return await self._on_topic(topic, lambda info: self._lease_in(info, buckets, limit, job))

    async def _lease_in(
        self, info: _Topic, buckets: Buckets, limit: int, job: _LeaseArgs
    ) -> Leases:
        wanted = info.wanted(buckets)
        if len(wanted) == 1:  # one timeline: no merge to plan, unless it has strays
            solo = await self._take(info, {(wanted[0], wanted[0]): limit}, job.now, job, solo=True)
            if solo is not None:
                return Leases([d for _, d in solo[0]], job.until, solo[1])
        out: list[tuple[int, Delivery]] = []
        dead = 0
        peeks = await self._survey(info, wanted, str(job.now), _sample(limit, len(wanted)))
        for _ in range(MAX_LEASE_ROUNDS):
            due = {tl: p for tl, p in peeks.items() if p.due}
            if not due:
                break
            quotas, bound, complete = _plan(due, limit - len(out), job.now)
            taken = await self._take(info, quotas, bound, job)
            assert taken is not None
            out += taken[0]
            dead += taken[1]
            if complete or len(out) >= limit:
                break
            sample = _sample(limit - len(out), len(due))
            peeks = await self._peek(info, list(due), str(job.now), sample, with_homes=False)
        # Ties as within one sorted set: by member (id bytes), then across buckets by bucket.
        out.sort(key=lambda bd: (bd[1].timestamp, bd[0], bd[1].id.encode()))
        return Leases([d for _, d in out], job.until, dead)

    async def _take(
        self,
        info: _Topic,
        quotas: dict[Timeline, int],
        bound: int,
        job: _LeaseArgs,
        solo: bool = False,
    ) -> tuple[list[tuple[int, Delivery]], int] | None:
        """Run the lease script on each timeline for its quota: (bucket, delivery)
        pairs and the dead-letter count; None when a solo call found strays of its
        bucket in other slots."""
        calls = []
        for (home, bucket), quota in quotas.items():
            s = info.slot(home)
            args = (info.gen, s.prefix, job.now, quota, bound, job.until, job.owner)
            calls.append(
                Call(
                    lua.LEASE,
                    (s.alive, s.timeline(bucket), s.owned, s.dead, s.dead_ids, s.stray_homes),
                    (*args, job.max_deliveries, "1" if solo else "0"),
                )
            )
        delivered: list[tuple[int, Delivery]] = []
        dead = 0
        for (_, bucket), reply in zip(quotas, await self._runner.run(calls), strict=True):
            if reply[0] == lua.STRAYS:
                return None
            died, numbers, blob = _body(reply)
            dead += died
            at = 0
            for ts, version, deliveries, id_len, size in _groups(numbers, lua.LEASED_ITEM):
                id = blob[at : at + id_len].decode()
                payload = blob[at + id_len : at + id_len + size]
                at += id_len + size
                delivered.append((bucket, Delivery(id, ts, payload, version, deliveries)))
        return delivered, dead

    async def _survey(
        self, info: _Topic, buckets: Sequence[int], max_score: str, sample: int
    ) -> dict[Timeline, _Peek]:
        """Peek the timelines of ``buckets``: each bucket's own, then its strays'."""
        peeks = await self._peek(info, [(b, b) for b in buckets], max_score, sample, True)
        strays = [(home, b) for (_, b), p in peeks.items() for home in p.homes]
        if strays:
            peeks.update(await self._peek(info, strays, max_score, sample, with_homes=False))
        return peeks

    async def _peek(
        self,
        info: _Topic,
        timelines: Sequence[Timeline],
        max_score: str,
        sample: int,
        with_homes: bool,
    ) -> dict[Timeline, _Peek]:
        calls = []
        for home, bucket in timelines:
            s = info.slot(home)
            args = (info.gen, max_score, sample, "1" if with_homes else "0")
            calls.append(Call(lua.PEEK, (s.alive, s.timeline(bucket), s.stray_homes), args))
        peeks = {}
        for tl, reply in zip(timelines, await self._runner.run(calls), strict=True):
            due, homes, scores = _body(reply)
            peeks[tl] = _Peek(due, _ints(homes), _ints(scores))
        return peeks

    async def _next_due(self, topic: str, buckets: Buckets) -> int | None:
        async def op(info: _Topic) -> int | None:
            peeks = await self._survey(info, info.wanted(buckets), "+inf", 1)
            return min((p.scores[0] for p in peeks.values() if p.scores), default=None)

        return await self._on_topic(topic, op)

    # -- settle ---------------------------------------------------------------

    async def _ack(
        self, topic: str, items: Sequence[SettleItem], owner: str, now: int
    ) -> list[Outcome]:
        return await self._settle(topic, "ack", items, owner, now, 0)

    async def _extend(
        self, topic: str, items: Sequence[SettleItem], owner: str, until: int
    ) -> list[Outcome]:
        return await self._settle(topic, "extend", items, owner, until, 0)

    async def _nack(
        self, topic: str, items: Sequence[SettleItem], owner: str, at: int, max_deliveries: int
    ) -> list[Outcome]:
        return await self._settle(topic, "nack", items, owner, at, max_deliveries)

    async def _settle(
        self,
        topic: str,
        mode: str,
        items: Sequence[SettleItem],
        owner: str,
        time: int,
        max_deliveries: int,
    ) -> list[Outcome]:
        async def op(info: _Topic) -> list[Outcome]:
            groups = info.by_home([id for id, _ in items])
            calls = []
            for home, indexes in groups.items():
                s = info.slot(home)
                args: list[lua.Arg] = [info.gen, s.prefix, mode, owner, time, max_deliveries]
                for i in indexes:
                    args += items[i]
                calls.append(Call(lua.SETTLE, (s.alive, s.owned, s.dead, s.dead_ids), args))
            out: list[Outcome | None] = [None] * len(items)
            for indexes, reply in zip(groups.values(), await self._runner.run(calls), strict=True):
                numbers, owners = _body(reply)
                refused = iter(owners)
                outcomes = _groups(numbers, lua.SETTLED_ITEM)
                for i, (code, version, ts) in zip(indexes, outcomes, strict=True):
                    id, expected = items[i]
                    if code == lua.OK:
                        out[i] = Settled(id, version, ts)
                        continue
                    owner_now = _str(next(refused)) or None
                    exists = code != lua.NOT_FOUND
                    err = check_holder(id, exists, owner_now, version, owner, expected)
                    out[i] = _refused(id, code, err)
            return [o for o in out if o is not None]

        return await self._on_topic(topic, op)

    # -- move / cancel --------------------------------------------------------

    async def _move(self, topic: str, id: str, version: int, at: int, now: int) -> Settled:
        return await self._mutate(topic, "move", id, version, at, now)

    async def _cancel(self, topic: str, id: str, version: int, now: int) -> Settled:
        return await self._mutate(topic, "cancel", id, version, 0, now)

    async def _mutate(
        self, topic: str, mode: str, id: str, version: int, at: int, now: int
    ) -> Settled:
        async def op(info: _Topic) -> Settled:
            s = info.slot(info.home(id))
            args = (info.gen, s.prefix, mode, id, version, at, now)
            [reply] = await self._runner.run([Call(lua.MUTATE, (s.alive, s.owned), args)])
            numbers, owners = _body(reply)
            [(code, version_now, ts)] = _groups(numbers, lua.SETTLED_ITEM)
            if code == lua.OK:
                return Settled(id, version_now, ts)
            owner_now = _str(owners[0]) or None
            exists = code != lua.NOT_FOUND
            err = check_movable(id, exists, owner_now, ts, version_now, version, now)
            raise _refused(id, code, err)

        return await self._on_topic(topic, op)

    # -- reads ----------------------------------------------------------------

    async def _get(self, topic: str, id: str) -> Message | None:
        async def op(info: _Topic) -> Message | None:
            [found] = await self._read(info, {info.home(id): [id]})
            return found

        return await self._on_topic(topic, op)

    async def _read(self, info: _Topic, ids_by_home: dict[int, list[str]]) -> list[Message | None]:
        """Messages by id (grouped by home slot), in the order given."""
        calls = []
        for home, ids in ids_by_home.items():
            s = info.slot(home)
            calls.append(Call(lua.READ, (s.alive,), (info.gen, s.prefix, *ids)))
        out: list[Message | None] = []
        replies = await self._runner.run(calls)
        for ids, reply in zip(ids_by_home.values(), replies, strict=True):
            body = _body(reply)
            for k, id in enumerate(ids):
                found, ts, v, n, owner, bucket, md, ex, dead, payload = body[
                    k * lua.READ_ITEM : (k + 1) * lua.READ_ITEM
                ]
                if not found:
                    out.append(None)
                    continue
                out.append(
                    Message(
                        id,
                        int(ts),
                        payload or b"",
                        int(v),
                        int(n),
                        _str(owner),
                        int(bucket),
                        int(md),
                        int(ex),
                        dead == b"1",
                    )
                )
        return out

    async def _counts(self, topic: str, now: int) -> Counts:
        async def op(info: _Topic) -> Counts:
            replies = await self._per_slot(
                info,
                lambda s: Call(
                    lua.COUNTS,
                    (s.alive, s.owned, s.dead, s.stray_timelines),
                    (info.gen, s.prefix, s.home, now),
                ),
            )
            live, due, leased, dead = (sum(column) for column in zip(*replies, strict=True))
            return Counts(waiting=live - due - leased, due=due, leased=leased, dead=dead)

        return await self._on_topic(topic, op)

    # -- release --------------------------------------------------------------

    async def _release(self, topic: str, owner: str, now: int) -> int:
        async def op(info: _Topic) -> int:
            replies = await self._per_slot(
                info,
                lambda s: Call(lua.RELEASE, (s.alive, s.owned), (info.gen, s.prefix, owner, now)),
            )
            return sum(released for [released] in replies)

        try:
            return await self._on_topic(topic, op)
        except NotFound:
            return 0

    # -- the dead timeline ----------------------------------------------------

    async def _list_dead(self, topic: str, after_id: str, limit: int) -> list[Message]:
        if limit <= 0:
            return []
        low = b"(" + after_id.encode() if after_id else b"-"

        async def op(info: _Topic) -> list[Message]:
            pages = await self._per_slot(
                info, lambda s: Call(lua.DEAD_PAGE, (s.alive, s.dead_ids), (info.gen, low, limit))
            )
            # Byte order of UTF-8 (Redis) is code point order (Python str).
            first = sorted((id, home) for home, page in enumerate(pages) for id in page)[:limit]
            by_home: dict[int, list[str]] = {}
            for id, home in first:
                by_home.setdefault(home, []).append(id.decode())
            found = await self._read(info, by_home)
            return sorted((m for m in found if m is not None and m.dead), key=lambda m: m.id)

        return await self._on_topic(topic, op)

    async def _redrive(self, topic: str, ids: Sequence[str] | None, at: int) -> int:
        async def op(info: _Topic) -> int:
            if ids is None:
                replies = await self._per_slot(info, lambda s: _redrive(info, s, at, "all", []))
            else:
                groups = {h: [ids[i] for i in idx] for h, idx in info.by_home(ids).items()}
                replies = await self._per_slot(
                    info, lambda s: _redrive(info, s, at, "ids", groups[s.home]), list(groups)
                )
            return sum(redriven for [redriven] in replies)

        return await self._on_topic(topic, op)

    async def _purge_dead(self, topic: str, died_before: int) -> int:
        async def op(info: _Topic) -> int:
            replies = await self._per_slot(
                info,
                lambda s: Call(
                    lua.PURGE, (s.alive, s.dead, s.dead_ids), (info.gen, s.prefix, died_before)
                ),
            )
            return sum(purged for [purged] in replies)

        return await self._on_topic(topic, op)


def _redrive(info: _Topic, s: Slot, at: int, which: str, ids: Sequence[str]) -> Call:
    return Call(lua.REDRIVE, (s.alive, s.dead, s.dead_ids), (info.gen, s.prefix, at, which, *ids))


def _refused(id: str, code: int, err: DejaqError | None) -> DejaqError:
    """The rules' error for a refusal the script reported (they must agree)."""
    if err is None:
        return StorageError(f"redis: script refused {id!r} (code {code}) but the rules allow it")
    return err


def _sample(remaining: int, timelines: int) -> int:
    """How many due timestamps to peek per timeline for a lease of ``remaining``."""
    return min(remaining, SAMPLE_SLACK * math.ceil(remaining / max(timelines, 1)) + 1)


def _plan(
    due: dict[Timeline, _Peek], remaining: int, now: int
) -> tuple[dict[Timeline, int], int, bool]:
    """Quotas per timeline, the timestamp bound, and whether that is everything due.

    Below the *horizon* — the last sampled score of any timeline that had more
    due than sampled — every due timestamp was sampled, so merging the samples
    there gives the exact earliest ``remaining`` (ties in any order).
    """
    if sum(p.due for p in due.values()) <= remaining:
        return {tl: p.due for tl, p in due.items()}, now, True
    horizon = min((p.scores[-1] for p in due.values() if p.due > len(p.scores)), default=now)
    merged = sorted((score, tl) for tl, p in due.items() for score in p.scores if score <= horizon)
    return dict(Counter(tl for _, tl in merged[:remaining])), horizon, False
