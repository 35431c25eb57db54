"""``redis://`` — the served in-memory backend (see ``RedisStorage``).

The subpackage, one concern per module: ``options`` (the URL), ``keys`` (every
key name), ``scripts`` and ``lua/`` (the atomic steps, and calling them),
``replies`` (reading their answers), ``registry`` (topics and their slots),
``leasing`` (lease passes and next_due over many buckets), ``reads`` (get,
counts), ``dead`` (the dead timeline) and this module (the ``Storage``
primitives).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence

from redis.asyncio import Redis, RedisCluster

from dejaq.core.buckets import Buckets
from dejaq.core.errors import DejaqError, InvalidArgument, NotFound, StorageError
from dejaq.core.model import (
    KIND_PRIORITY,
    Counts,
    InsertStatus,
    Leases,
    Message,
    NewMessage,
    OnDuplicate,
    Settled,
    Topic,
)
from dejaq.storage_plugins.base import (
    Forecast,
    HandBack,
    Head,
    KeyLoad,
    LeaseRequest,
    Migration,
    Outcome,
    ScanPage,
    SettleItem,
    Storage,
)
from dejaq.storage_plugins.redis import by_due, columns, dead, keys, leasing, reads, record, scan
from dejaq.storage_plugins.redis import scripts as lua
from dejaq.storage_plugins.redis.migrate import upgrade
from dejaq.storage_plugins.redis.options import parse_url
from dejaq.storage_plugins.redis.registry import Registry, TopicEntry, per_slot
from dejaq.storage_plugins.redis.replies import body, groups, text
from dejaq.storage_plugins.redis.scripts import Call, Runner
from dejaq.storage_plugins.rules import check_holder, check_movable

log = logging.getLogger(__name__)
BOUND_WARN_S = 600.0  # a topic whose tombstones outgrow max_tombstones is told this often


class RedisStorage(Storage):
    insert_chunk = 250  # ~1.5 ms of the event loop, and of the server, each

    """Storage on one Redis server (6.2 or newer): sorted sets and Lua scripts.

    Construct with a URL, then ``open()`` (connects and loads the scripts)::

        redis://[[user]:password@]host[:port][/db][?option=value&...]
        rediss://...   (TLS)

    Options (integers):

    - ``wait_replicas=N`` (default 0): a produce, an ack and a move, rewrite or
      cancel also wait (``WAIT``) until N replicas have them, and raise
      ``StorageUnavailable`` when fewer acknowledge within ``wait_timeout_ms``
      (default 1000). The write may still be on the primary: a retried produce
      then finds those ids as duplicates (produce is idempotent by id). On
      ``redis+cluster://`` and ``redis+sentinel://`` the other writes (topics,
      dead letters) wait too. Lease moves — lease passes, extends, nacks, hand
      backs, releases — and reads never wait: lost in a failover, a lease
      move only means a redelivery, so a master without its replica still
      delivers what it holds.
    - ``socket_timeout_ms=5000``, ``connect_timeout_ms=2000``: a dead or hung
      server fails a call with ``StorageUnavailable`` instead of hanging it.
      Calls are never retried by the client: a lease or insert sent twice is not
      the same as once; the broker retries whole calls.
    - ``topic_slots=1``: how many Redis Cluster hash slots a topic created by
      this instance spreads over (at most its bucket count). It is recorded
      with the topic, so every broker agrees whatever its own URL says. With
      one slot (the default here; 8 on ``redis+cluster://``) every call on a
      topic is one atomic script and a lease pass or next_due is one script
      whatever the bucket count. With N slots a topic's buckets
      are split into N contiguous ranges (one per hash slot, so per shard); a
      pass costs a script per slot its buckets touch — one round trip under a
      steady load, two when a backlog is merged (``leasing``) — and the
      throughput of one topic can use N shards.

    - ``max_tombstones=1000000``: how many tombstones (ids kept taken for a
      topic's dedup window after their message is deleted) a topic keeps at
      most, the oldest forgotten first by each retention sweep, which also
      forgets those older than the window; 0: no count bound. Each costs about
      100 bytes of the server's memory, and under a steady load the window
      alone does not bound them (1,000 acks/s for the default 24 h is 86M), so
      between two sweeps a topic holds at most this many plus a sweep
      period's worth of acks. With the bound an id may be free again before
      its window ends (at 1,000 acks/s, after about 17 minutes).

    Over TLS (``rediss://``): ``ssl_ca_certs=PATH`` (the CA to trust; default
    the system's), ``ssl_certfile=PATH`` and ``ssl_keyfile=PATH`` (a client
    certificate, when the server asks for one: ``tls-auth-clients yes``), and
    ``ssl_check_hostname=false`` to accept a certificate not naming the host
    (the chain is still verified). The password, if any, is masked wherever
    the URL is printed.

    Durability is the server's: ``appendonly yes`` with ``appendfsync always``
    keeps every acknowledged call through a crash of the server, ``everysec``
    may lose the last second, no persistence loses everything on restart.

    Layout and slotting: ``keys``. Atomicity: each call is one Lua script per
    slot it touches (``scripts``), atomic in that slot; a message lives in one
    slot, so two leasers never get one message. ``insert`` over several slots
    sends its scripts in one MULTI / EXEC: a batch is stored whole or (connection
    lost) not at all. This class speaks to a single server (``redis.asyncio.Redis``);
    ``cluster.RedisClusterStorage`` (``redis+cluster://``) runs the same layout
    and scripts on a Redis Cluster.

    Stored format: ``keys.FORMAT`` holds the version of the layout
    (``keys.FORMAT_VERSION``), written by the first broker that opens the
    store; a broker opening a store of another version fails at ``open`` with a
    ``StorageError`` naming both versions (and, for an older one, ``dejaq
    storage migrate``), before it reads or writes anything else. ``migrate``
    upgrades an older version in place (``migrate`` module).

    Costs per call: insert, settle, move, get — one script per slot touched,
    O(log n) per message (plus, per bucket touched, keeping the heads index).
    lease — one script per slot asked, walking the heads of the asked buckets
    in time order (``leasing``); next_due — one script per slot asked, reading
    the first asked entry of its heads. promote (priority topics) — as a lease,
    walking the slot's ``waits`` index instead, so only timelines that may hold
    an available message are read, however many messages wait ranked. counts —
    one script per slot, a ZCARD and a ZCOUNT per non-empty timeline, no record
    read. census — per topic, counts and one script per slot reading the first
    entry of its heads; when that is a rank, also the head's record and the
    timelines ``waits`` puts at or before now, until a bound passes the best
    found (``reads.oldest``). release — reads the records of the slot's leased messages (``owned``)
    only. list_dead — up to ``limit`` ids from every slot, then the records of
    the first ``limit``.
    redrive-all, purge, delete_topic — one script per slot, linear in what they
    change (delete_topic blocks the server while a slot is deleted).

    Measured (loopback, 2 shared cores, 50,000 waiting): with 64 buckets in one
    slot an idle lease pass and a next_due take ~0.15 ms each, as with one
    bucket (one script per bucket took ~2.3 ms each); at 1,000 due/s a pass
    takes ~0.26 ms (was ~2.6 ms) and lateness p50 is 1 ms (was 6-23 ms).
    """

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.options = parse_url(url)
        self._client: Redis | RedisCluster | None = None
        self._runner_: Runner | None = None
        self._registry_: Registry | None = None
        o = self.options
        self._wait = (o.wait_replicas, o.wait_timeout_ms) if o.wait_replicas else None
        self._bound_warned: dict[str, float] = {}  # topic -> when (monotonic s) last told
        self._id_orders = scan.IdOrders()  # buckets' ids in order, kept between scan pages

    async def open(self) -> None:
        await self._start()
        try:
            await self._check_format()
        except BaseException:
            await self.close()
            raise

    async def _start(self) -> None:
        """Connect and load the scripts."""
        o = self.options
        timeout_ms = o.socket_timeout_ms
        if self._wait is not None:  # WAIT blocks the connection for up to its timeout
            timeout_ms = max(timeout_ms, o.wait_timeout_ms + 1000)
        self._client, self._runner_ = self._connect(timeout_ms / 1000)
        self._registry_ = Registry(self._runner_)
        try:
            await self._runner_.load()
        except BaseException:
            await self.close()
            raise

    async def _check_format(self) -> None:
        """Mark a new store with this layout's version; refuse a store of another."""
        mine = str(keys.FORMAT_VERSION)
        await self._runner.command("SET", keys.FORMAT, mine, "NX")
        stored = text(await self._runner.command("GET", keys.FORMAT))
        if stored in (mine, None):  # None: deleted meanwhile, marked again next open
            return
        if stored.isdigit() and int(stored) < keys.FORMAT_VERSION:
            raise StorageError(
                f"redis: the store holds dejaq's stored format version {stored!r}, and this"
                f" dejaq reads version {mine} only: stop the brokers of the older dejaq and"
                f" upgrade the store with `dejaq storage migrate URL` (the README's upgrade steps)"
            )
        raise StorageError(
            f"redis: the store holds dejaq's stored format version {stored!r}, and this"
            f" dejaq reads version {mine} only: run a dejaq that reads it"
        )

    async def migrate(self) -> Migration:
        await self._start()
        try:
            before, moved = await upgrade(self._runner, self._registry)
        finally:
            await self.close()
        return Migration(before, keys.FORMAT_VERSION, moved)

    def _connect(self, timeout_s: float) -> tuple[Redis | RedisCluster, Runner]:
        """The client (not connected yet) and the runner that sends its calls."""
        o = self.options
        client = Redis.from_url(o.url, **o.client_arguments(timeout_s))
        return client, Runner(client)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = self._runner_ = self._registry_ = None

    async def healthy(self) -> bool:
        try:
            await self._runner.command("PING", durable=False)
        except StorageError:
            return False
        return True

    async def server_time_us(self) -> int | None:
        seconds, micros = await self._runner.command("TIME", durable=False)
        return int(seconds) * 1_000_000 + int(micros)

    async def _identity(self) -> str:
        await self._runner.command("SET", keys.IDENTITY, uuid.uuid4().hex, "NX")
        identity = text(await self._runner.command("GET", keys.IDENTITY))
        if identity is None:  # deleted between the two commands: a new one next time
            raise StorageError("redis: the storage identity was deleted while read")
        return identity

    @property
    def _runner(self) -> Runner:
        if self._runner_ is None:
            raise StorageError("redis storage used before open()")
        return self._runner_

    @property
    def _registry(self) -> Registry:
        if self._registry_ is None:
            raise StorageError("redis storage used before open()")
        return self._registry_

    # -- topics ---------------------------------------------------------------

    async def _create_topic(self, topic: Topic) -> None:
        await self._registry.create(topic, self.options.topic_slots)

    async def _delete_topic(self, name: str) -> None:
        await self._registry.delete(name)

    async def _update_topic(self, topic: Topic) -> bool:
        return await self._registry.update(topic)

    async def _get_topic(self, name: str) -> Topic | None:
        info = await self._registry.load(name)
        return info.topic if info is not None else None

    async def _list_topics(self) -> list[Topic]:
        return await self._registry.all()

    # -- insert ---------------------------------------------------------------

    async def _insert(self, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]:
        return await self._registry.on_topic(topic, lambda info: self._insert_in(info, messages))

    async def _debounce(
        self, topic: str, messages: Sequence[NewMessage], mode: OnDuplicate, now: int
    ) -> list[InsertStatus]:
        return await self._registry.on_topic(
            topic, lambda info: self._insert_in(info, messages, mode, now)
        )

    async def _insert_in(
        self,
        info: TopicEntry,
        messages: Sequence[NewMessage],
        mode: OnDuplicate = OnDuplicate.KEEP,
        now: int = 0,
    ) -> list[InsertStatus]:
        groups_ = info.by_home([m.id for m in messages])
        strays: set[tuple[int, int]] = set()  # (home slot, the bucket's own slot)
        inserts = []
        for home, indexes in groups_.items():
            s = info.slot(home)
            batch = [messages[i] for i in indexes]
            for m in batch:
                if not 0 <= m.bucket < info.buckets:
                    raise InvalidArgument(f"message {m.id!r}: bucket {m.bucket} is out of range")
                if info.slot_of(m.bucket) != home:
                    strays.add((home, info.slot_of(m.bucket)))
            laned = info.topic.settings.kind != KIND_PRIORITY  # a priority topic takes by rank
            records, apart = record.new_records(batch, laned)
            headed = [i for i, m in enumerate(batch) if m.headers]
            keyed = [i for i, m in enumerate(batch) if m.key] if laned else []
            args = (
                info.gen,
                s.prefix,
                *columns.texts(m.id for m in batch),
                columns.decimals(m.timestamp for m in batch),
                columns.decimals(m.bucket for m in batch),
                *columns.strings(records),
                *columns.strings(batch[i].payload for i in apart),
                columns.decimals(i + 1 for i in apart),
                *columns.texts(batch[i].key for i in keyed),
                columns.decimals(i + 1 for i in keyed),
                *columns.strings(batch[i].headers for i in headed),
                columns.decimals(i + 1 for i in headed),
                "" if mode is OnDuplicate.KEEP else mode.label,
                now,
            )
            inserts.append(Call(lua.INSERT, (s.alive, s.heads, s.grants, *info.optional(s)), args))
        # Make strays findable from their bucket's slot before they exist.
        pointers = [
            Call(None, (), ("SADD", info.slot(own).stray_homes, home))
            for home, own in sorted(strays)
        ]
        replies = await self._runner.run(pointers + inserts, atomic=True, wait=self._wait)
        out = [InsertStatus.ACCEPTED] * len(messages)
        for indexes, reply in zip(groups_.values(), replies[len(pointers) :], strict=True):
            for i, status in zip(indexes, body(reply), strict=True):
                if status:
                    out[i] = InsertStatus(status)
        return out

    # -- lease ----------------------------------------------------------------

    async def _lease(self, request: LeaseRequest) -> Leases:
        return await self._registry.on_topic(
            request.topic, lambda info: leasing.lease(self._runner, info, request)
        )

    async def _promote(self, topic: str, buckets: Buckets, now: int, limit: int) -> int:
        return await self._registry.on_topic(
            topic, lambda info: leasing.promote(self._runner, info, buckets, now, limit)
        )

    async def _next_due(self, topic: str, buckets: Buckets) -> int | None:
        return await self._registry.on_topic(
            topic, lambda info: leasing.next_due(self._runner, info, buckets)
        )

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

    async def _hand_back(self, topic: str, items: Sequence[HandBack], owner: str) -> list[Outcome]:
        pairs = [(id, version) for id, version, _ in items]
        return await self._settle(topic, "back", pairs, owner, 0, 0, [due for *_, due in items])

    async def _settle(
        self,
        topic: str,
        mode: str,
        items: Sequence[SettleItem],
        owner: str,
        time: int,
        max_deliveries: int,
        dues: Sequence[int] = (),  # "back": each item's due timestamp
    ) -> list[Outcome]:
        async def op(info: TopicEntry) -> list[Outcome]:
            by_home = info.by_home([id for id, _ in items])
            calls = []
            for home, indexes in by_home.items():
                s = info.slot(home)
                args: list[lua.Arg] = [info.gen, s.prefix, mode, owner, time, max_deliveries]
                args += columns.texts(items[i][0] for i in indexes)
                args.append(columns.decimals(items[i][1] for i in indexes))
                if dues:
                    args.append(columns.decimals(dues[i] for i in indexes))
                keys_ = (s.alive, s.heads, s.grants, s.dead, s.dead_ids, *info.optional(s))
                calls.append(Call(lua.SETTLE, keys_, args))
            out: list[Outcome | None] = [None] * len(items)
            # An ack waits for the replicas; an extend, nack or hand back moves a
            # lease, whose loss in a failover only means a redelivery.
            durable = mode == "ack"
            wait = self._wait if durable else None
            replies = await self._runner.run(calls, wait=wait, durable=durable)
            for indexes, reply in zip(by_home.values(), replies, strict=True):
                numbers, owners = body(reply)
                refused = iter(owners)
                outcomes = groups(numbers, lua.SETTLED_ITEM)
                for i, (code, version, ts) in zip(indexes, outcomes, strict=True):
                    id, expected = items[i]
                    if code == lua.OK:
                        out[i] = Settled(id, version, ts)
                        continue
                    owner_now = text(next(refused)) or None
                    exists = code != lua.NOT_FOUND
                    err = check_holder(id, exists, owner_now, version, owner, expected)
                    out[i] = _refused(id, code, err)
            return [o for o in out if o is not None]

        return await self._registry.on_topic(topic, op)

    # -- move / cancel --------------------------------------------------------

    async def _move(
        self,
        topic: str,
        id: str,
        version: int,
        at: int,
        now: int,
        payload: bytes | None,
        priority: int | None,
    ) -> Settled:
        mode = "move" if payload is None else "rewrite"
        return await self._mutate(topic, mode, id, version, at, now, payload or b"", priority)

    async def _cancel(self, topic: str, id: str, version: int, now: int) -> Settled:
        return await self._mutate(topic, "cancel", id, version, 0, now)

    async def _mutate(
        self,
        topic: str,
        mode: str,
        id: str,
        version: int,
        at: int,
        now: int,
        payload: bytes = b"",
        priority: int | None = None,
    ) -> Settled:
        async def op(info: TopicEntry) -> Settled:
            s = info.slot(info.home(id))
            keep = "" if priority is None else priority
            args = (info.gen, s.prefix, mode, id, version, at, now, payload, keep)
            call = Call(lua.MUTATE, (s.alive, s.heads, s.grants, *info.optional(s)), args)
            [reply] = await self._runner.run([call], wait=self._wait)
            numbers, owners = body(reply)
            [(code, version_now, ts)] = groups(numbers, lua.SETTLED_ITEM)
            if code == lua.OK:
                return Settled(id, version_now, ts)
            owner_now = text(owners[0]) or None
            exists = code != lua.NOT_FOUND
            err = check_movable(id, exists, owner_now, ts, version_now, version, now)
            raise _refused(id, code, err)

        return await self._registry.on_topic(topic, op)

    # -- reads ----------------------------------------------------------------

    async def _get(self, topic: str, id: str) -> Message | None:
        async def op(info: TopicEntry) -> Message | None:
            [found] = await reads.read(self._runner, info, {info.home(id): [id]})
            return found

        return await self._registry.on_topic(topic, op)

    async def _counts(self, topic: str, now: int) -> Counts:
        return await self._registry.on_topic(topic, lambda i: reads.counts(self._runner, i, now))

    async def _oldest(self, topic: Topic, now: int) -> tuple[int | None, Head | None]:
        return await self._registry.on_topic(
            topic.name, lambda i: reads.oldest(self._runner, i, now)
        )

    async def _by_due(self, topic: str, after: tuple[int, str] | None, limit: int) -> list[Message]:
        return await self._registry.on_topic(
            topic, lambda i: by_due.by_due(self._runner, i, after, limit)
        )

    async def _keys(self, topic: str, now: int, limit: int) -> list[KeyLoad]:
        return await self._registry.on_topic(
            topic, lambda i: reads.busiest(self._runner, i, now, limit)
        )

    async def _forecast(self, topic: str, request: Forecast) -> list[int]:
        return await self._registry.on_topic(
            topic, lambda i: reads.forecast(self._runner, i, request)
        )

    # -- release --------------------------------------------------------------

    async def _release(self, topic: str, owner: str, now: int) -> int:
        async def op(info: TopicEntry) -> int:
            replies = await per_slot(
                self._runner,
                info,
                lambda s: Call(
                    lua.RELEASE,
                    (s.alive, s.heads, s.grants, *info.optional(s)),
                    (info.gen, s.prefix, owner, now),
                ),
                durable=False,  # a lease move: lost, its messages are due again
            )
            return sum(released for [released] in replies)

        try:
            return await self._registry.on_topic(topic, op)
        except NotFound:
            return 0

    # -- the dead timeline ----------------------------------------------------

    async def _list_dead(self, topic: str, after_id: str, limit: int) -> list[Message]:
        if limit <= 0:
            return []
        return await self._registry.on_topic(
            topic, lambda info: dead.list_dead(self._runner, info, after_id, limit)
        )

    async def _scan(self, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
        return await self._registry.on_topic(
            topic,
            lambda info: scan.scan(self._runner, info, bucket, after_id, limit, self._id_orders),
        )

    async def _redrive(self, topic: str, ids: Sequence[str] | None, at: int) -> int:
        return await self._registry.on_topic(
            topic, lambda info: dead.redrive(self._runner, info, ids, at)
        )

    async def _purge_dead(self, topic: str, died_before: int) -> int:
        return await self._registry.on_topic(
            topic, lambda info: dead.purge(self._runner, info, died_before)
        )

    async def _forget_tombstones(self, topic: str, ids: Sequence[str]) -> int:
        async def op(info: TopicEntry) -> int:
            calls = []
            for home, indexes in info.by_home(ids).items():
                s = info.slot(home)
                args = (info.gen, s.prefix, *[ids[i] for i in indexes])
                calls.append(Call(lua.FORGET_TOMBS, (s.alive,), args))
            return sum(n for [n] in map(body, await self._runner.run(calls)))

        return await self._registry.on_topic(topic, op)

    async def _purge_tombstones(self, topic: str, deleted_before: int, limit: int) -> int:
        async def op(info: TopicEntry) -> int:
            forgotten = early = 0
            keep = -(-self.options.max_tombstones // info.slots)  # a slot's share, rounded up
            for index in range(info.slots):  # slot by slot: at most `limit` in all
                s = info.slot(index)
                args = (info.gen, s.prefix, deleted_before, limit - forgotten, keep)
                call = Call(lua.PURGE_TOMBS, (s.alive, s.graves), args)
                [reply] = await self._runner.run([call])
                count, inside = body(reply)
                forgotten += count
                early += inside
                if forgotten >= limit:
                    break
            if early:
                self._warn_bound(topic, early)
            return forgotten

        return await self._registry.on_topic(topic, op)

    def _warn_bound(self, topic: str, early: int) -> None:
        """Tombstones forgotten inside their window: said once in a while per topic."""
        now = time.monotonic()
        if now - self._bound_warned.get(topic, -BOUND_WARN_S) < BOUND_WARN_S:
            return
        self._bound_warned[topic] = now
        log.warning(
            "redis: topic %r: %d tombstones forgotten inside the topic's dedup window"
            " (max_tombstones=%d): an id acked before them may be produced again",
            topic,
            early,
            self.options.max_tombstones,
        )


def _refused(id: str, code: int, err: DejaqError | None) -> DejaqError:
    """The rules' error for a refusal the script reported (they must agree)."""
    if err is None:
        return StorageError(f"redis: script refused {id!r} (code {code}) but the rules allow it")
    return err
