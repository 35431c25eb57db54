"""``postgresql://`` — the served backend: PostgreSQL through psycopg 3 (async).

Each call reads the rows it changes ``FOR UPDATE`` (lease: ``FOR UPDATE SKIP
LOCKED``), decides with ``sql_base`` / ``rules`` and writes in batch
statements, inside one transaction: a call applies fully or not at all. A
lease pass and ``next_due`` are one statement each, whatever the number of
buckets and messages (``sql``); a pass with keys due shares its limit
among them (``sql_base.FairShare``) from the due lanes its first statement
returned, a statement a step (each key's share one seek over a whole
topic), and sets a lane again only once nothing of it is due (a pipelined
transaction of two statements); a settle, move or cancel is one pipelined
transaction of two statements, and an ack of messages the owner still holds
one statement (only refused items take the two). Batch columns travel as
binary arrays (``arrays``). Connections: ``pool``; URL: ``options``;
schema: ``schema``; every statement: ``sql``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dejaq.core import priority
from dejaq.core.buckets import Buckets
from dejaq.core.errors import AlreadyExists, InvalidArgument, NotFound, StorageError
from dejaq.core.model import (
    KIND_PRIORITY,
    Counts,
    InsertStatus,
    LeasedMessage,
    Leases,
    Message,
    NewMessage,
    OnDuplicate,
    Settled,
    Topic,
)
from dejaq.storage_plugins import sql_base as base
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
    TopicCensus,
)
from dejaq.storage_plugins.postgres import scan, sql
from dejaq.storage_plugins.postgres.arrays import Bools, Byteas, Int4s, Int8s, Texts
from dejaq.storage_plugins.postgres.options import PostgresOptions, parse_url
from dejaq.storage_plugins.postgres.pool import Conn, Pool, storage_error
from dejaq.storage_plugins.rules import Fate
from dejaq.storage_plugins.sql_base import RowState, SettlePlan

__all__ = ["PostgresOptions", "PostgresStorage", "parse_url", "storage_error"]


async def _one(conn: Conn, query: str, params: Sequence[Any] | Mapping[str, Any]) -> Any:
    row = await (await conn.execute(query, params)).fetchone()
    assert row is not None, "the statement always returns a row"
    return row


async def _all(conn: Conn, query: str, params: Mapping[str, Any]) -> list[Any]:
    return await (await conn.execute(query, params)).fetchall()


async def _require_topic(conn: Conn, topic: str) -> None:
    if await (await conn.execute(sql.TOPIC_EXISTS, (topic,))).fetchone() is None:
        raise NotFound(f"topic {topic!r} does not exist")


def _counted(live: int, dead: int, due: int, leased: int) -> Counts:
    """Counts by state from a topic's live and dead rows and those due and leased."""
    return Counts(waiting=int(live) - due - leased, due=due, leased=leased, dead=int(dead))


def _missing(topic: str) -> NotFound:
    return NotFound(f"topic {topic!r} does not exist")


_KILLED = Fate.KILL.value  # read once: an enum member's value is a descriptor call


def _written(rows: list[Any]) -> list[Any]:
    """The messages a lease statement wrote (its rows after the summary
    columns), in candidate order: by time, then as the index keeps equal times."""
    return sorted(row[7:] for row in rows if row[7] is not None)


def _delivered(written: list[Any], out: list[LeasedMessage]) -> int:
    """Add the deliveries among ``written`` to ``out``; how many were dead-lettered."""
    dead = 0
    for _, fate, id, ts, version, deliveries, prio, key, payload, headers in written:
        if fate == _KILLED:
            dead += 1
        else:
            out.append(LeasedMessage(id, ts, payload, version, deliveries, prio, key, headers))
    return dead


# A fair pass counts each due lane's messages up to this many (sql.FAIR_HEADS):
# a key whose lanes all hold fewer is known to the message, and its share
# needs no step of its own to find out it has no more.
LANE_COUNT = sql.LANE_COUNT


def _known(lanes: list[Any], whole: bool) -> dict[str, int]:
    """The due counts of the keys whose every due lane was counted in full,
    from FAIR_HEADS rows (key, bucket, head, due); ``whole``: FAIR_KEY_HEADS
    rows, each lane with its key's count (counted once)."""
    counts: dict[str, int] = {}
    partial: set[str] = set()
    for key, _, head, due in lanes:
        if head is None:
            continue
        if due >= LANE_COUNT:
            partial.add(key)
        counts[key] = int(due) if whole else counts.get(key, 0) + int(due)
    return {k: n for k, n in counts.items() if k not in partial}


def _planned(share: base.FairShare, known: Mapping[str, int]) -> dict[str, int]:
    """What ``share``'s steps would take in all were each key of ``known`` to
    yield its count and every other key all it is asked (a copy is stepped;
    ``share`` is left as it is): the first step of a pass."""
    virtual = base.FairShare(share.limit, list(share.active), share.caps)
    left = dict(known)
    plan: dict[str, int] = {}
    while allotment := virtual.allot():
        for key, n in allotment.items():
            got = min(n, left[key]) if key in left else n
            if key in left:
                left[key] -= got
            plan[key] = plan.get(key, 0) + got
            virtual.took(key, n, got, got)
    return {k: n for k, n in plan.items() if n}


class _Step:
    """Runs the steps of one fair pass (sql.KEY_LEASE) and gathers what they took."""

    def __init__(
        self,
        storage: PostgresStorage,
        conn: Conn,
        request: LeaseRequest,
        params: dict[str, Any],
        where: Mapping[str, list[int]],
    ) -> None:
        self._storage = storage
        self._conn = conn
        self._request = request
        self._params = params
        self._where = where
        self._unkeyed: list[int] | None = None
        self.out: list[LeasedMessage] = []
        self.dead = 0

    async def run(self, allotment: Mapping[str, int]) -> tuple[Counter[str], Counter[str]]:
        """Take ``allotment`` (key -> n); the rows read and the messages
        delivered, by key."""
        keys: list[str] = []
        buckets: list[int] = []
        ns: list[int] = []
        whole_keys: list[str] = []
        whole_ns: list[int] = []
        for key, n in allotment.items():
            if key and self._request.buckets is None:
                whole_keys.append(key)
                whole_ns.append(n)
                continue
            if key:
                spread = self._where[key]
            else:  # the unkeyed messages: every asked bucket
                if self._unkeyed is None:
                    self._unkeyed = await self._storage._asked(self._conn, self._request)
                spread = self._unkeyed
            keys += [key] * len(spread)
            buckets += spread
            ns += [n] * len(spread)
        run = self._params | {
            "keys": Texts(keys),
            "buckets": Int4s(buckets),
            "ns": Int4s(ns),
            "whole_keys": Texts(whole_keys),
            "whole_ns": Int4s(whole_ns),
            "limit": sum(allotment.values()),
            "window": sum(allotment.values()),
        }
        written = _written(await _all(self._conn, sql.KEY_LEASE, run))
        taken: list[LeasedMessage] = []
        self.dead += _delivered(written, taken)
        self.out += taken
        return Counter(row[7] for row in written), Counter(d.key for d in taken)


_RANKING_TRIES = 3


@dataclass(frozen=True, slots=True)
class Ranking:
    """What ``sql.PROMOTE_*`` needs of a priority topic: core.priority's step
    and base, and the topic as read (creation time, settings as stored), which
    the statement checks is still the stored one."""

    params: dict[str, Any]

    @classmethod
    def of(cls, row: Sequence[Any]) -> Ranking:
        """From a ``sql.GET_TOPIC`` row; InvalidArgument on a timeline."""
        topic = base.topic_from_row(row)
        if topic.settings.kind != KIND_PRIORITY:
            raise InvalidArgument(f"topic {topic.name!r} is a timeline: it has no priorities")
        return cls(
            {
                "created_at": topic.created_at_ms,
                "settings": row[1],
                "step": priority.step(topic),
                "base": priority.RANK_BASE,
            }
        )


def _debounce_params(topic: str, plan: base.DebouncePlan) -> dict[str, Any]:
    """``sql.DEBOUNCE`` parameters for a plan."""
    new = plan.replaced
    return {
        "topic": topic,
        "ids": Texts(m.id for m in new),
        "buckets": Int4s(m.bucket for m in new),
        "ts": Int8s(m.timestamp for m in new),
        "md": Int4s(m.max_deliveries for m in new),
        "expires_at": Int8s(m.expires_at for m in new),
        "priorities": Int4s(m.priority for m in new),
        "keys": Texts(m.key for m in new),
        "payloads": Byteas(m.payload for m in new),
        "headers": Byteas(m.headers for m in new),
        "moved": Texts(m.id for m in plan.extended),
        "moved_ts": Int8s(m.timestamp for m in plan.extended),
    }


class _Locked:
    """The rows ``sql.LOCK_STATES`` locked: their states, and where they are."""

    def __init__(self, topic: str, rows: list[Any]) -> None:
        if any(row[2] is None for row in rows):  # the topic-is-missing row
            raise _missing(topic)
        self._topic = topic
        self.states = {row[2]: RowState(*row[3:]) for row in rows}
        self._tids = {row[2]: (row[0], row[1]) for row in rows}

    def writes(self, plan: SettlePlan, now: int) -> dict[str, Any] | None:
        """``sql.APPLY_STATES`` parameters for a plan (deletes at ``now``); None
        when it changes nothing."""
        if not plan.deleted and not plan.updated:
            return None
        gone = [self._tids[id] for id in plan.deleted]
        states = plan.updated.values()
        return {
            "topic": self._topic,
            "now": now,
            "deleted": Texts(tid for tid, _ in gone),
            "deleted_payloads": Texts(payload for _, payload in gone if payload is not None),
            "tids": Texts(self._tids[id][0] for id in plan.updated),
            "ts": Int8s(st.ts for st in states),
            "versions": Int8s(st.version for st in states),
            "deliveries": Int4s(st.deliveries for st in states),
            "owners": Texts(st.owner for st in states),
            "deads": Bools(bool(st.dead) for st in states),
        }


class PostgresStorage(Storage):
    """PostgreSQL storage, shared by any number of brokers.

    URL: ``postgresql://user:password@host:5432/database`` (or ``postgres://``)
    with options:

    - ``min_size=1``, ``max_size=10``: the connection pool (psycopg_pool).
    - ``pool_timeout=5``: seconds a call waits for a pooled connection
      (connecting included) before failing with ``StorageUnavailable``.
    - ``connect_timeout=5``: seconds libpq waits for the server to answer.
    - ``synchronous_commit=on|remote_apply|remote_write|local|off``: the
      session's commit durability (below); by default the server's setting.
    - ``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``,
      ``application_name``, ``target_session_attrs``: passed to libpq as they are.

    Durability. Every call returns (an acknowledged produce included) only
    after its ``COMMIT`` returned, so it is as durable as the session's
    ``synchronous_commit`` makes a commit:

    - ``on`` (PostgreSQL's default): the WAL is flushed to the primary's disk —
      and, when the server lists synchronous standbys in
      ``synchronous_standby_names`` (``'FIRST 1 (s1, s2)'``, or a quorum
      ``'ANY 2 (s1, s2, s3)'``), to theirs too: an acknowledged produce then
      survives the loss of the primary.
    - ``remote_apply``: as ``on``, and the standbys have also applied it, so a
      standby promoted or read right after the acknowledgement already shows it.
    - ``remote_write``: the standbys have written it but not flushed it: it
      survives the primary's loss, not that of primary and standby OS together.
    - ``local``: the primary's disk only, even with standbys listed: a
      failover may lose the last acknowledged calls.
    - ``off``: the commit returns before the flush; a server crash may lose
      the last ~0.6 s of acknowledged calls (never corrupting anything). Fast,
      and only for messages one can afford to lose.

    Without synchronous standbys the remote levels behave as ``local``. While
    a synchronous standby is unreachable, commits wait for it (PostgreSQL's
    rule); a call cancelled during that wait is already committed on the
    primary. So is, perhaps, a call whose connection broke during its
    ``COMMIT``: it fails as ``StorageUnavailable`` and a produce may be
    retried (an id already stored is reported ``DUPLICATE`` and left untouched).

    ``open`` creates or migrates the schema (``schema``). A lost connection or
    an unreachable server is ``StorageUnavailable``.
    """

    # A lease statement can wait tens of ms behind produce transactions: at
    # 10k/s, 100 ms of send-ahead held p99 at 6.7 ms once and failed (19.7 ms)
    # once; 150 ms held (6.85 ms).
    send_ahead_ms = 200

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.options = parse_url(url)
        self._pool = Pool(self.options)
        # Priority topics promoted by this instance: their ranking parameters
        # (the statement checks they are still the stored ones).
        self._rankings: dict[str, Ranking] = {}

    async def open(self) -> None:
        await self._pool.open()

    async def close(self) -> None:
        await self._pool.close()

    async def migrate(self) -> Migration:
        """``open`` runs the schema's migrations (``schema``); this reports them."""
        await self.open()
        await self.close()
        before = self._pool.migrated_from
        return Migration(before or None, len(sql.MIGRATIONS), 0)

    async def healthy(self) -> bool:
        try:
            async with self._pool.connection() as conn:
                await conn.execute(sql.PING)
        except StorageError:
            return False
        return True

    async def server_time_us(self) -> int | None:
        async with self._pool.connection() as conn:
            (us,) = await _one(conn, sql.SERVER_TIME_US, ())
        return int(us)

    async def _identity(self) -> str:
        async with self._pool.connection() as conn:
            database, created = await _one(conn, sql.IDENTITY, {})
        return f"{database}@{created}"

    # -- topics ---------------------------------------------------------------

    async def _create_topic(self, topic: Topic) -> None:
        async with self._pool.connection() as conn:
            params = (topic.name, base.settings_json(topic), topic.created_at_ms)
            if (await conn.execute(sql.INSERT_TOPIC, params)).rowcount == 0:
                raise AlreadyExists(f"topic {topic.name!r} already exists")

    async def _delete_topic(self, name: str) -> None:
        async with self._pool.transaction() as conn:
            await conn.execute(sql.LOCK_TOPIC, (name,))
            (deleted,) = await _one(conn, sql.DELETE_TOPIC, {"topic": name})
            if deleted == 0:
                raise _missing(name)
        self._rankings.pop(name, None)

    async def _update_topic(self, topic: Topic) -> bool:
        params = (base.settings_json(topic), topic.name, topic.created_at_ms)
        async with self._pool.connection() as conn:
            return (await conn.execute(sql.UPDATE_TOPIC, params)).rowcount == 1

    async def _get_topic(self, name: str) -> Topic | None:
        async with self._pool.connection() as conn:
            row = await (await conn.execute(sql.GET_TOPIC, (name,))).fetchone()
        return base.topic_from_row(row) if row is not None else None

    async def _list_topics(self) -> list[Topic]:
        async with self._pool.connection() as conn:
            rows = await (await conn.execute(sql.LIST_TOPICS)).fetchall()
        return [base.topic_from_row(row) for row in rows]

    # -- messages -------------------------------------------------------------

    async def _insert(self, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]:
        statuses, fresh = base.plan_insert(messages)
        async with self._pool.transaction() as conn:
            await conn.execute(sql.LOCK_TOPIC_SHARED, (topic,))
            taken = await self._insert_in(conn, topic, fresh)
        # An id the batch repeats was planned a duplicate; one already stored, or
        # tombstoned, is too.
        return [
            InsertStatus.DUPLICATE if s is InsertStatus.ACCEPTED and m.id not in taken else s
            for s, m in zip(statuses, messages, strict=True)
        ]

    async def _insert_in(self, conn: Conn, topic: str, fresh: list[NewMessage]) -> set[str]:
        """Store messages with ids new to the batch, after LOCK_TOPIC_SHARED; the
        ids stored (one already there, or tombstoned, is not)."""
        # In id order: two batches sharing ids then wait for each other instead
        # of deadlocking (each would hold one id the other needs next).
        fresh.sort(key=lambda m: m.id)
        params = {
            "topic": topic,
            "ids": Texts(m.id for m in fresh),
            "buckets": Int4s(m.bucket for m in fresh),
            "ts": Int8s(m.timestamp for m in fresh),
            "md": Int4s(m.max_deliveries for m in fresh),
            "expires_at": Int8s(m.expires_at for m in fresh),
            "priorities": Int4s(m.priority for m in fresh),
            "keys": Texts(m.key for m in fresh),
            "payloads": Byteas(m.payload for m in fresh),
            "headers": Byteas(m.headers for m in fresh),
        }
        inserted = await conn.execute(sql.INSERT_MESSAGES, params)
        # Sent in the same round trip (pipeline); runs once the insert is done.
        undone = await conn.execute(sql.UNDO_TOMBSTONED, params)
        exists, stored = await inserted.fetchone() or (False, [])
        [tombstoned] = await undone.fetchone() or ([],)
        if not exists:
            raise _missing(topic)
        return set(stored) - set(tombstoned)

    async def _debounce(
        self, topic: str, messages: Sequence[NewMessage], mode: OnDuplicate, now: int
    ) -> list[InsertStatus]:
        out: dict[str, InsertStatus] = {}
        pending = list(messages)
        async with self._pool.transaction() as conn:
            await conn.execute(sql.LOCK_TOPIC_SHARED, (topic,))
            # An id another producer stores meanwhile makes our insert of it a
            # conflict: its row is there once that commits, so it is judged again
            # (each round one producer's insert wins: the rounds end).
            while pending:
                ids = [m.id for m in pending]
                locked = await self._locked(conn, topic, ids)
                tombs = await _all(conn, sql.TOMBSTONED_IDS, {"topic": topic, "ids": Texts(ids)})
                plan = base.plan_debounce(
                    pending, locked.states, (id for (id,) in tombs), mode, now
                )
                await conn.execute(sql.DEBOUNCE, _debounce_params(topic, plan))
                out.update(zip(ids, plan.statuses, strict=True))
                stored = await self._insert_in(conn, topic, plan.fresh) if plan.fresh else set()
                pending = [m for m in plan.fresh if m.id not in stored]
        return [out[m.id] for m in messages]

    async def _lease(self, request: LeaseRequest) -> Leases:
        statement = sql.LEASE_TOPIC if request.buckets is None else sql.LEASE_BUCKETS
        params: dict[str, Any] = {
            "topic": request.topic,
            "buckets": None if request.buckets is None else Int4s(request.buckets),
            "now": request.now,
            "bound": request.bound,
            "until": request.until,
            "owner": request.owner,
            "max_deliveries": request.max_deliveries,
        }
        out: list[LeasedMessage] = []
        dead = 0
        skipped = 0  # due rows another leaser held: look past them next time
        async with self._pool.connection() as conn:
            # Dead letters do not use up the limit, and rows locked by another
            # leaser are skipped: lease again until the limit or nothing due is left.
            while True:
                wanted = request.limit - len(out)
                window = wanted + skipped
                rows = await _all(conn, statement, params | {"limit": wanted, "window": window})
                candidates, exists, keyed, *heads = rows[0][:7]
                if not exists:
                    raise _missing(request.topic)
                if keyed and out:
                    break  # a key came due meanwhile: the next pass shares by key
                if keyed:
                    lanes = list(zip(*heads, strict=True))
                    fair = await self._lease_fairly(conn, request, params, lanes)
                    return Leases(fair.delivered, fair.lease_until, fair.dead_lettered + dead)
                written = _written(rows)
                dead += _delivered(written, out)
                skipped = candidates - len(written)
                if len(out) >= request.limit or candidates < window:
                    break
        return Leases(out, request.until, dead)

    async def _lease_fairly(
        self, conn: Conn, request: LeaseRequest, params: dict[str, Any], lanes: list[Any]
    ) -> Leases:
        """A pass over keyed messages due: the limit shared among the keys
        (sql_base.FairShare), a statement a step. The first step takes what
        every step would, known the due counts of the keys with few due
        (``_planned``): one step, unless a key yields less than it was
        thought to have. Over the whole topic a key's earliest messages are
        one seek across its buckets; over some buckets, a seek in each bucket
        where its lanes are due; the unkeyed ones a seek in every asked
        bucket. Then the lanes that need it are set again. ``lanes``: the due
        lanes as sql.FAIR_HEADS reads them (over the whole topic
        sql.FAIR_KEY_HEADS: each with its key's figures), which the pass's
        first statement returned."""
        keyed = [ln for ln in lanes if ln[1] is not None]
        stale = [ln for ln in keyed if ln[2] is None]  # nothing due
        heads, where = base.heads_of(ln[:3] for ln in keyed if ln[2] is not None)
        for key, _, ts, _ in lanes:
            if key == "" and ts is not None:
                heads[""] = ts
        share = base.FairShare.of(request.limit, heads, request.caps)
        step = _Step(self, conn, request, params, where)
        spent: set[str] = set()  # keys with nothing more due
        known = _known(keyed, request.buckets is None)
        allotment = _planned(share, known)
        while allotment:
            rows, delivered = await step.run(allotment)
            for key, n in allotment.items():
                share.took(key, n, rows[key], delivered[key])
                if rows[key] < n or rows[key] >= known.get(key, rows[key] + 1):
                    spent.add(key)
                    if key in share.active:
                        share.active.remove(key)
            allotment = share.allot()
        # A lane's head may stay early while its key still has messages due
        # (the next pass reads its true earliest anyway): it is set again
        # once nothing of it is due, when its key ran out or it was found so.
        spent_lanes = [ln[:3] for ln in keyed if ln[0] in spent and ln[2] is not None]
        await self._fix_lanes(conn, request.topic, [ln[:3] for ln in stale] + spent_lanes)
        step.out.sort(key=lambda d: d.timestamp)
        return Leases(step.out, request.until, step.dead)

    async def _asked(self, conn: Conn, request: LeaseRequest) -> list[int]:
        """The buckets a pass asks: its own, or every bucket of the topic."""
        if request.buckets is not None:
            return list(request.buckets)
        (count,) = await _one(conn, sql.TOPIC_BUCKET_COUNT, (request.topic,))
        return list(range(int(count)))

    async def _fix_lanes(self, conn: Conn, topic: str, lanes: list[Any]) -> None:
        """Set the heads of the lanes a pass took from (their messages are later
        now, or gone), those no other writer holds at the moment."""
        keyed = sorted((int(bucket), key) for key, bucket, _ in lanes if key)
        if not keyed:
            return
        # Pipelined: BEGIN goes with LOCK_LANES, FIX_LANES with COMMIT (two
        # round trips, not four); FIX_LANES still starts, and takes its
        # snapshot, only once LOCK_LANES is done.
        async with conn.pipeline(), conn.transaction():
            pairs = {"topic": topic, "buckets": Int4s(b for b, _ in keyed)}
            pairs["keys"] = Texts(k for _, k in keyed)
            locked = await _all(conn, sql.LOCK_LANES, pairs)
            if locked:
                fix = {
                    "topic": topic,
                    "buckets": Int4s(b for b, _ in locked),
                    "keys": Texts(k for _, k in locked),
                }
                await conn.execute(sql.FIX_LANES, fix)

    async def _promote(self, topic: str, buckets: Buckets, now: int, limit: int) -> int:
        statement = sql.PROMOTE_TOPIC if buckets is None else sql.PROMOTE_BUCKETS
        params: dict[str, Any] = {
            "topic": topic,
            "buckets": None if buckets is None else Int4s(sorted({int(b) for b in buckets})),
            "now": now,
        }
        promoted = 0
        skipped = 0  # available rows another transaction held: look past them next time
        tries = 0
        async with self._pool.connection() as conn:
            # As a lease pass: rows locked by another promoter (or a settle) are
            # skipped, so promote again until the limit or nothing available is left.
            while True:
                ranking = self._rankings.get(topic) or await self._ranking(conn, topic)
                wanted = limit - promoted
                window = wanted + skipped
                run = params | ranking.params | {"limit": wanted, "window": window}
                matched, candidates, moved = await _one(conn, statement, run)
                if not matched:
                    self._rankings.pop(topic, None)  # changed since read: read it again
                    tries += 1
                    if tries == _RANKING_TRIES:
                        raise StorageError(f"postgres: topic {topic!r} kept changing")
                    continue
                promoted += int(moved)
                skipped = int(candidates) - int(moved)
                if promoted >= limit or candidates < window:
                    return promoted

    async def _ranking(self, conn: Conn, topic: str) -> Ranking:
        """The ranking parameters of ``topic`` as stored now (and cached)."""
        row = await (await conn.execute(sql.GET_TOPIC, (topic,))).fetchone()
        if row is None:
            raise _missing(topic)
        ranking = self._rankings[topic] = Ranking.of(row)
        return ranking

    async def _next_due(self, topic: str, buckets: Buckets) -> int | None:
        async with self._pool.connection() as conn:
            if buckets is None:
                exists, ts = await _one(conn, sql.NEXT_DUE, {"topic": topic})
            else:
                params = {"topic": topic, "buckets": Int4s(sorted({int(b) for b in buckets}))}
                exists, ts = await _one(conn, sql.NEXT_DUE_IN_BUCKETS, params)
        if not exists:
            raise _missing(topic)
        return None if ts is None else int(ts)

    async def _locked(self, conn: Conn, topic: str, ids: list[str]) -> _Locked:
        """Lock rows by id (sorted, so overlapping batches cannot deadlock)."""
        rows = await _all(conn, sql.LOCK_STATES, {"topic": topic, "ids": Texts(sorted(ids))})
        return _Locked(topic, rows)

    async def _write(self, conn: Conn, locked: _Locked, plan: SettlePlan, now: int = 0) -> None:
        """Apply ``plan``; ``now`` is when deleted messages were deleted (their tombstones)."""
        params = locked.writes(plan, now)
        if params is not None:
            await conn.execute(sql.APPLY_STATES, params)

    async def _settle(
        self,
        topic: str,
        items: Sequence[SettleItem],
        plan: Callable[[dict[str, RowState]], SettlePlan],
        now: int = 0,
    ) -> list[Outcome]:
        async with self._pool.transaction() as conn:
            locked = await self._locked(conn, topic, list({id for id, _ in items}))
            planned = plan(locked.states)
            await self._write(conn, locked, planned, now)
        return planned.outcomes

    async def _ack(
        self, topic: str, items: Sequence[SettleItem], owner: str, now: int
    ) -> list[Outcome]:
        ids = sorted(id for id, _ in items)  # in id order: see _locked
        if not ids or len(set(ids)) < len(ids):  # an id twice: the plan judges each in turn
            return await self._settle(topic, items, lambda st: base.plan_ack(items, st, owner), now)
        versions = dict(items)
        params = {
            "topic": topic,
            "owner": owner,
            "now": now,
            "ids": Texts(ids),
            "versions": Int8s(versions[id] for id in ids),
        }
        async with self._pool.transaction() as conn:
            acked: dict[str, int] = dict(await _all(conn, sql.ACK_HELD, params))
            if len(acked) == len(items):
                return [Settled(id, 0, acked[id]) for id, _ in items]
            # Refused (or not found, or changed meanwhile): judged as they are now.
            rest = [(id, v) for id, v in items if id not in acked]
            locked = await self._locked(conn, topic, [id for id, _ in rest])
            planned = base.plan_ack(rest, locked.states, owner)
            await self._write(conn, locked, planned, now)
        judged = iter(planned.outcomes)
        return [Settled(id, 0, acked[id]) if id in acked else next(judged) for id, _ in items]

    async def _extend(
        self, topic: str, items: Sequence[SettleItem], owner: str, until: int
    ) -> list[Outcome]:
        return await self._settle(
            topic, items, lambda st: base.plan_extend(items, st, owner, until)
        )

    async def _nack(
        self, topic: str, items: Sequence[SettleItem], owner: str, at: int, max_deliveries: int
    ) -> list[Outcome]:
        return await self._settle(
            topic, items, lambda st: base.plan_nack(items, st, owner, at, max_deliveries)
        )

    async def _hand_back(self, topic: str, items: Sequence[HandBack], owner: str) -> list[Outcome]:
        pairs = [(id, version) for id, version, _ in items]
        return await self._settle(topic, pairs, lambda st: base.plan_hand_back(items, st, owner))

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
        async with self._pool.transaction() as conn:
            locked = await self._locked(conn, topic, [id])
            settled, new = base.plan_move(id, locked.states.get(id), version, at, now)
            await self._write(conn, locked, SettlePlan(updated={id: new}))
            if payload is not None:
                await conn.execute(sql.SET_PAYLOAD, (payload, topic, id))
            if priority is not None:
                await conn.execute(sql.SET_PRIORITY, (priority, topic, id))
        return settled

    async def _cancel(self, topic: str, id: str, version: int, now: int) -> Settled:
        async with self._pool.transaction() as conn:
            locked = await self._locked(conn, topic, [id])
            settled = base.plan_cancel(id, locked.states.get(id), version, now)
            await self._write(conn, locked, SettlePlan(deleted={id}), now)
        return settled

    async def _get(self, topic: str, id: str) -> Message | None:
        async with self._pool.connection() as conn:
            params = {"topic": topic, "id": id}
            row = await (await conn.execute(sql.GET_MESSAGE, params)).fetchone()
            if row is None:
                await _require_topic(conn, topic)
                return None
        return base.message_from_row(row)

    async def _release(self, topic: str, owner: str, now: int) -> int:
        async with self._pool.connection() as conn:
            params = {"topic": topic, "owner": owner, "now": now}
            (count,) = await _one(conn, sql.RELEASE_OWNER, params)
        return int(count)

    async def _counts(self, topic: str, now: int) -> Counts:
        async with self._pool.connection() as conn:
            exists, live, dead, due, leased = await _one(
                conn, sql.COUNTS, {"topic": topic, "now": now}
            )
        if not exists:
            raise _missing(topic)
        return _counted(live, dead, due, leased)

    async def _forecast(self, topic: str, request: Forecast) -> list[int]:
        params = {"topic": topic, "now": request.now, "step": request.step_ms, "bins": request.bins}
        async with self._pool.connection() as conn:
            rows = await (await conn.execute(sql.FORECAST, params)).fetchall()
        if not any(index is None for index, _ in rows):
            raise _missing(topic)
        return base.binned((row for row in rows if row[0] is not None), request.bins)

    async def _census(self, now: int) -> dict[str, TopicCensus]:
        async with self._pool.connection() as conn:
            await conn.execute(sql.FOLD_COUNTS)  # the gauges ask every few seconds
            cur = await conn.execute(sql.CENSUS, {"now": now})
            rows = await cur.fetchall()
        return {
            name: TopicCensus(
                buckets,
                _counted(live, dead, due, leased),
                oldest,
                None if priority is None else Head(priority, due_unranked),
            )
            for name, buckets, live, dead, due, leased, oldest, priority, due_unranked in rows
        }

    async def _list_dead(self, topic: str, after_id: str, limit: int) -> list[Message]:
        async with self._pool.connection() as conn:
            params = {"topic": topic, "after_id": after_id, "limit": limit}
            rows = await _all(conn, sql.LIST_DEAD, params)
            if not rows:
                await _require_topic(conn, topic)
        return [base.message_from_row(row) for row in rows]

    async def _by_due(self, topic: str, after: tuple[int, str] | None, limit: int) -> list[Message]:
        ts, id = base.FIRST if after is None else after
        async with self._pool.connection() as conn:
            params = {"topic": topic, "ts": ts, "id": id, "limit": limit}
            rows = await _all(conn, sql.BY_DUE, params)
            if len(rows) < limit:
                await _require_topic(conn, topic)
        return [base.message_from_row(row) for row in rows]

    async def _scan(self, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
        async with self._pool.connection() as conn:
            return await scan.scan(conn, topic, bucket, after_id, limit)

    async def _redrive(self, topic: str, ids: Sequence[str] | None, at: int) -> int:
        async with self._pool.connection() as conn:
            if ids is None:
                (count,) = await _one(conn, sql.REDRIVE_ALL, {"topic": topic, "at": at})
            else:
                params = {"topic": topic, "at": at, "ids": Texts(ids)}
                (count,) = await _one(conn, sql.REDRIVE_IDS, params)
            if count == 0:
                await _require_topic(conn, topic)
            return int(count)

    async def _keys(self, topic: str, now: int, limit: int) -> list[KeyLoad]:
        async with self._pool.connection() as conn:
            rows = await _all(conn, sql.KEYS, {"topic": topic, "now": now})
        if not any(key is None for key, *_ in rows):
            raise _missing(topic)
        due = [(key, n, oldest) for key, n, oldest, _ in rows if key is not None and n]
        held = [(key, n) for key, _, _, n in rows if key is not None and n]
        return base.busiest(due, held, limit)

    async def _purge_dead(self, topic: str, died_before: int) -> int:
        async with self._pool.connection() as conn:
            params = {"topic": topic, "died_before": died_before}
            (count,) = await _one(conn, sql.PURGE_DEAD, params)
            if count == 0:
                await _require_topic(conn, topic)
        return int(count)

    async def _forget_tombstones(self, topic: str, ids: Sequence[str]) -> int:
        async with self._pool.connection() as conn:
            params = {"topic": topic, "ids": Texts(sorted(set(ids)))}
            exists, count = await _one(conn, sql.FORGET_TOMBSTONES, params)
        if not exists:
            raise _missing(topic)
        return int(count)

    async def _purge_tombstones(self, topic: str, deleted_before: int, limit: int) -> int:
        async with self._pool.connection() as conn:
            params = {"topic": topic, "deleted_before": deleted_before, "limit": limit}
            exists, count = await _one(conn, sql.PURGE_TOMBSTONES, params)
        if not exists:
            raise _missing(topic)
        return int(count)
