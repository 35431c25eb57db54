"""``postgresql://`` — the served backend: PostgreSQL through psycopg 3 (async).

URL: ``postgresql://user:password@host:5432/database`` (or ``postgres://``)
with options:

- ``min_size=1``, ``max_size=10``: the connection pool (psycopg_pool).
- ``pool_timeout=5``: seconds a call waits for a pooled connection (connecting
  included) before failing with ``StorageUnavailable``.
- ``connect_timeout=5``: seconds libpq waits for the server to answer.
- ``synchronous_commit=on|remote_apply|remote_write|local|off``: the session's
  commit durability (below); by default the server's setting.
- ``sslmode``, ``sslrootcert``, ``sslcert``, ``sslkey``, ``application_name``,
  ``target_session_attrs``: passed to libpq as they are.

Durability. Every call is one transaction, and returns (an acknowledged
produce included) only after its ``COMMIT`` returned, so it is as durable as
the session's ``synchronous_commit`` makes a commit:

- ``on`` (PostgreSQL's default): the WAL is flushed to the primary's disk —
  and, when the server lists synchronous standbys in
  ``synchronous_standby_names`` (``'FIRST 1 (s1, s2)'``, or a quorum
  ``'ANY 2 (s1, s2, s3)'``), to theirs too. With standbys listed, an
  acknowledged produce survives the loss of the primary: replicated durability.
- ``remote_apply``: as ``on``, and the standbys have also applied it, so a
  standby promoted or read right after the acknowledgement already shows it.
- ``remote_write``: the standbys have written it but not flushed it: it
  survives the primary's loss, not that of primary and standby OS together.
- ``local``: the primary's disk only, even with standbys listed: a failover
  may lose the last acknowledged calls.
- ``off``: the commit returns before the flush; a server crash may lose the
  last ~0.6 s of acknowledged calls (never corrupting anything). Fast, and
  only for messages one can afford to lose.

Without synchronous standbys the remote levels behave as ``local``. While a
synchronous standby is unreachable, commits wait for it (PostgreSQL's rule);
a call cancelled during that wait is already committed on the primary. So is,
perhaps, a call whose connection broke during its ``COMMIT``: it fails as
``StorageUnavailable`` and a produce may be retried (an id already stored is
reported ``DUPLICATE`` and left untouched).

Schema: created and migrated by ``open`` (``dejaq_schema`` records the
migrations applied, in ``sql.MIGRATIONS`` order), under an advisory
lock so brokers starting together migrate one at a time. Each call reads the
rows it changes ``FOR UPDATE`` (lease: ``FOR UPDATE SKIP LOCKED``), decides
with ``sql_base`` (the planners shared with ``sqlite://``) and writes in batch
statements, all in one transaction: a call applies fully or not at all. A lost
connection or an unreachable server is ``StorageUnavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from dejaq.core.buckets import Buckets
from dejaq.core.errors import (
    AlreadyExists,
    InvalidArgument,
    NotFound,
    StorageError,
    StorageUnavailable,
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
)
from dejaq.storage_plugins import sql_base as base
from dejaq.storage_plugins.base import LeaseRequest, Outcome, SettleItem, Storage
from dejaq.storage_plugins.postgres import sql
from dejaq.storage_plugins.sql_base import SettlePlan, State

Conn = psycopg.AsyncConnection[Any]
SYNCHRONOUS_COMMIT = ("on", "remote_apply", "remote_write", "local", "off")
# Passed to libpq untouched.
LIBPQ_OPTIONS = (
    "connect_timeout",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "application_name",
    "target_session_attrs",
)


@dataclass(frozen=True, slots=True)
class PostgresOptions:
    conninfo: str  # the URL libpq sees: dejaq's own options removed
    min_size: int = 1
    max_size: int = 10
    pool_timeout: float = 5.0
    synchronous_commit: str | None = None  # None = the server's setting


def _positive(cast: Callable[[str], float]) -> Callable[[str, str], float]:
    def parse(key: str, value: str) -> float:
        try:
            number = cast(value)
        except ValueError:
            number = 0
        if number <= 0:
            raise InvalidArgument(f"bad value {value!r} for postgres option {key!r}: expected > 0")
        return number

    return parse


def _level(key: str, value: str) -> str:
    if value.lower() not in SYNCHRONOUS_COMMIT:
        expected = ", ".join(SYNCHRONOUS_COMMIT)
        raise InvalidArgument(f"bad value {value!r} for postgres option {key!r}: one of {expected}")
    return value.lower()


# dejaq's own options: the field of PostgresOptions each fills
_PARSERS: dict[str, Callable[[str, str], Any]] = {
    "min_size": _positive(int),
    "max_size": _positive(int),
    "pool_timeout": _positive(float),
    "synchronous_commit": _level,
}
_CHECKED_LIBPQ = {"connect_timeout": _positive(int)}


def parse_url(url: str) -> PostgresOptions:
    """Read a ``postgresql://...?option=value`` URL; ``InvalidArgument`` names what is wrong."""
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise InvalidArgument(f"expected postgresql://user@host:port/database, got {url!r}")
    fields: dict[str, Any] = {}
    libpq = {"connect_timeout": "5"}
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key in _PARSERS:
            fields[key] = _PARSERS[key](key, value)
        elif key in LIBPQ_OPTIONS:
            if key in _CHECKED_LIBPQ:
                _CHECKED_LIBPQ[key](key, value)
            libpq[key] = value
        else:
            known = ", ".join([*_PARSERS, *LIBPQ_OPTIONS])
            raise InvalidArgument(f"unknown postgres option {key!r}: expected one of {known}")
    conninfo = urlunsplit(parts._replace(query=urlencode(libpq)))
    options = PostgresOptions(conninfo, **fields)
    if options.max_size < options.min_size:
        raise InvalidArgument(f"postgres option max_size must be >= min_size ({options.min_size})")
    return options


# SQLSTATE classes worth a retry: connection exception, transaction rollback
# (deadlock, serialization), insufficient resources, operator intervention
# (shutdown, cancel), system error (I/O); and lock_not_available.
_TRANSIENT = ("08", "40", "53", "57", "58", "55P03")


def storage_error(exc: psycopg.Error) -> StorageError:
    """The dejaq error for a psycopg one: a lost or refused connection, an empty
    pool and transient server conditions are ``StorageUnavailable`` (retry later);
    anything else (a bug, a limit) is a plain ``StorageError``."""
    if isinstance(exc, PoolClosed):
        return StorageUnavailable("postgres storage is closed")
    state = exc.sqlstate
    if state is None:  # raised by the client: connection trouble, pool timeout
        transient = isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    else:
        transient = state.startswith(_TRANSIENT)
    return (StorageUnavailable if transient else StorageError)(f"postgres: {exc}")


async def migrate(conn: Conn) -> None:
    """Bring the schema to the newest version, one migration at a time."""
    async with conn.transaction():
        await conn.execute(sql.LOCK_SCHEMA)
        await conn.execute(sql.CREATE_SCHEMA_TABLE)
        (version,) = await _one(conn, sql.SCHEMA_VERSION, ())
        if version > len(sql.MIGRATIONS):
            raise StorageError(
                f"postgres: the schema is at version {version}, newer than"
                f" {len(sql.MIGRATIONS)}: upgrade dejaq"
            )
        for number, steps in enumerate(sql.MIGRATIONS[version:], start=version + 1):
            for statement in steps:
                await conn.execute(statement)
            await conn.execute(sql.RECORD_MIGRATION, (number,))


async def _one(conn: Conn, query: str, params: Sequence[Any] | Mapping[str, Any]) -> Any:
    row = await (await conn.execute(query, params)).fetchone()
    assert row is not None, "the statement always returns a row"
    return row


async def _all(conn: Conn, query: str, params: Mapping[str, Any]) -> list[Any]:
    return await (await conn.execute(query, params)).fetchall()


async def _require_topic(conn: Conn, topic: str) -> None:
    if await (await conn.execute(sql.TOPIC_EXISTS, (topic,))).fetchone() is None:
        raise NotFound(f"topic {topic!r} does not exist")


async def _claim(
    conn: Conn, topic: str, buckets: list[int] | None, now: int, limit: int, seen: list[str]
) -> tuple[list[Any], bool]:
    """Lock up to ``limit`` due rows (``sql.CLAIM_*`` rows) and say whether more
    may be due. From some buckets: their earliest ids first, not yet in ``seen``
    (extended with them), then those still due and not locked by another leaser."""
    if buckets is None:
        rows = await _all(conn, sql.CLAIM_DUE, {"topic": topic, "now": now, "limit": limit})
        return rows, len(rows) == limit
    params = {"topic": topic, "buckets": buckets, "now": now, "window": limit, "seen": seen}
    ids = [row[0] for row in await _all(conn, sql.DUE_IN_BUCKETS, params)]
    seen += ids
    if not ids:
        return [], False
    rows = await _all(conn, sql.CLAIM_IDS, {"topic": topic, "ids": ids, "now": now, "limit": limit})
    return rows, len(ids) == limit


async def _apply(conn: Conn, topic: str, plan: SettlePlan) -> None:
    if not plan.deleted and not plan.updated:
        return
    states = plan.updated
    await conn.execute(
        sql.APPLY_STATES,
        {
            "topic": topic,
            "deleted": list(plan.deleted),
            "ids": list(states),
            "ts": [st.ts for st in states.values()],
            "versions": [st.version for st in states.values()],
            "owners": [st.owner for st in states.values()],
            "deads": [bool(st.dead) for st in states.values()],
        },
    )


class PostgresStorage(Storage):
    """The ``postgresql://`` backend: a connection pool, schema migrated by ``open``."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.options = parse_url(url)
        self._pool: AsyncConnectionPool[Conn] | None = None
        self._checking: asyncio.Task[None] | None = None

    async def open(self) -> None:
        # One plain connection first: it migrates, and its failure reads better
        # than a pool's timeout.
        try:
            conn = await psycopg.AsyncConnection.connect(self.options.conninfo, autocommit=True)
            async with conn:
                await migrate(conn)
        except psycopg.Error as exc:
            raise storage_error(exc) from exc
        pool: AsyncConnectionPool[Conn] = AsyncConnectionPool(
            self.options.conninfo,
            min_size=self.options.min_size,
            max_size=self.options.max_size,
            timeout=self.options.pool_timeout,
            kwargs={"autocommit": True},  # transactions are explicit (conn.transaction())
            configure=self._configure,
            open=False,
            name="dejaq",
        )
        try:
            await pool.open(wait=True, timeout=self.options.pool_timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise StorageUnavailable(f"postgres: cannot fill the pool: {exc}") from exc
        self._pool = pool

    async def _configure(self, conn: Conn) -> None:
        await conn.execute(sql.SESSION_SETUP)
        if self.options.synchronous_commit is not None:
            await conn.execute(sql.SET_SYNCHRONOUS_COMMIT, (self.options.synchronous_commit,))

    async def close(self) -> None:
        if self._checking is not None:
            self._checking.cancel()
        if self._pool is not None:
            await self._pool.close()

    async def healthy(self) -> bool:
        try:
            async with self._connection() as conn:
                await conn.execute(sql.PING)
        except StorageError:
            return False
        return True

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[Conn]:
        """A pooled connection (autocommit); psycopg errors become dejaq ones."""
        if self._pool is None:
            raise StorageUnavailable("postgres storage used before open()")
        try:
            async with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            error = storage_error(exc)
            if isinstance(error, StorageUnavailable):
                self._drop_broken()
            raise error from exc

    @contextlib.asynccontextmanager
    async def _transaction(self) -> AsyncIterator[Conn]:
        """A connection in a transaction: committed at the end, rolled back on any error."""
        async with self._connection() as conn, conn.transaction():
            yield conn

    def _drop_broken(self) -> None:
        """After a lost connection the idle ones are likely lost too (a server
        restart): test them all now, so one call fails rather than one per connection."""
        if self._pool is not None and (self._checking is None or self._checking.done()):
            self._checking = asyncio.get_running_loop().create_task(self._check_pool(self._pool))

    @staticmethod
    async def _check_pool(pool: AsyncConnectionPool[Conn]) -> None:
        with contextlib.suppress(psycopg.Error):
            await pool.check()

    # -- topics ---------------------------------------------------------------

    async def _create_topic(self, topic: Topic) -> None:
        async with self._connection() as conn:
            params = (topic.name, base.settings_json(topic), topic.created_at_ms)
            if (await conn.execute(sql.INSERT_TOPIC, params)).rowcount == 0:
                raise AlreadyExists(f"topic {topic.name!r} already exists")

    async def _delete_topic(self, name: str) -> None:
        async with self._transaction() as conn:
            await conn.execute(sql.LOCK_TOPIC, (name,))
            (deleted,) = await _one(conn, sql.DELETE_TOPIC, {"topic": name})
            if deleted == 0:
                raise NotFound(f"topic {name!r} does not exist")

    async def _get_topic(self, name: str) -> Topic | None:
        async with self._connection() as conn:
            row = await (await conn.execute(sql.GET_TOPIC, (name,))).fetchone()
        return base.topic_from_row(row) if row is not None else None

    async def _list_topics(self) -> list[Topic]:
        async with self._connection() as conn:
            rows = await (await conn.execute(sql.LIST_TOPICS)).fetchall()
        return [base.topic_from_row(row) for row in rows]

    # -- messages -------------------------------------------------------------

    async def _insert(self, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]:
        statuses, fresh = base.plan_insert(messages)
        # In id order: two batches sharing ids then wait for each other instead
        # of deadlocking (each would hold one id the other needs next).
        fresh.sort(key=lambda m: m.id)
        params = {
            "topic": topic,
            "ids": [m.id for m in fresh],
            "buckets": [m.bucket for m in fresh],
            "ts": [m.timestamp for m in fresh],
            "md": [m.max_deliveries for m in fresh],
            "expires_at": [m.expires_at for m in fresh],
            "payloads": [m.payload for m in fresh],
        }
        async with self._transaction() as conn:
            await conn.execute(sql.LOCK_TOPIC_SHARED, (topic,))
            exists, stored = await _one(conn, sql.INSERT_MESSAGES, params)
            if not exists:
                raise NotFound(f"topic {topic!r} does not exist")
        # An id the batch repeats was planned a duplicate; one already stored is too.
        taken = set(stored)
        return [
            InsertStatus.DUPLICATE if s is InsertStatus.ACCEPTED and m.id not in taken else s
            for s, m in zip(statuses, messages, strict=True)
        ]

    async def _lease(self, request: LeaseRequest) -> Leases:
        topic, buckets, now, limit = request.topic, request.buckets, request.now, request.limit
        lease_ms, owner, max_deliveries = request.lease_ms, request.owner, request.max_deliveries
        until = now + lease_ms
        wanted = None if buckets is None else sorted({int(b) for b in buckets})
        out: list[Delivery] = []
        dead = 0
        seen: list[str] = []  # ids tried from the buckets, skipped or not
        async with self._transaction() as conn:
            # Dead letters do not use up the limit, and rows locked by another
            # leaser are skipped: claim again until the limit or nothing due is left.
            while len(out) < limit:
                rows, more = await _claim(conn, topic, wanted, now, limit - len(out), seen)
                plan = base.plan_lease((base.Due(*row[:6]) for row in rows), now, max_deliveries)
                if rows:
                    params = {"topic": topic, "until": until, "owner": owner, "now": now}
                    params |= {"keep": plan.keep, "kill": plan.kill, "drop": plan.drop}
                    await conn.execute(sql.APPLY_LEASE, params)
                payloads = {row[0]: row[6] for row in rows}
                out += [base.delivery(row, payloads[row.id]) for row in plan.deliver]
                dead += len(plan.kill)
                if not more:
                    break
            if not out and not dead:
                await _require_topic(conn, topic)
        return Leases(out, until, dead)

    async def _next_due(self, topic: str, buckets: Buckets) -> int | None:
        async with self._connection() as conn:
            if buckets is None:
                row = await (await conn.execute(sql.NEXT_DUE, {"topic": topic})).fetchone()
            else:
                params = {"topic": topic, "buckets": sorted({int(b) for b in buckets})}
                row = await _one(conn, sql.NEXT_DUE_IN_BUCKETS, params)
            if row is None or row[0] is None:
                await _require_topic(conn, topic)
                return None
            return int(row[0])

    async def _settle(
        self,
        topic: str,
        items: Sequence[SettleItem],
        plan: Callable[[dict[str, State]], SettlePlan],
    ) -> list[Outcome]:
        ids = sorted({id for id, _ in items})
        async with self._transaction() as conn:
            rows = await _all(conn, sql.LOCK_STATES, {"topic": topic, "ids": ids})
            states = {row[0]: State(*row[1:]) for row in rows}
            if len(states) < len(ids) or not ids:
                await _require_topic(conn, topic)
            planned = plan(states)
            await _apply(conn, topic, planned)
        return planned.outcomes

    async def _ack(
        self, topic: str, items: Sequence[SettleItem], owner: str, now: int
    ) -> list[Outcome]:
        return await self._settle(topic, items, lambda st: base.plan_ack(items, st, owner))

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

    async def _locked_state(self, conn: Conn, topic: str, id: str) -> State | None:
        rows = await _all(conn, sql.LOCK_STATES, {"topic": topic, "ids": [id]})
        if not rows:
            await _require_topic(conn, topic)
            return None
        return State(*rows[0][1:])

    async def _move(self, topic: str, id: str, version: int, at: int, now: int) -> Settled:
        async with self._transaction() as conn:
            st = await self._locked_state(conn, topic, id)
            settled, new = base.plan_move(id, st, version, at, now)
            await _apply(conn, topic, SettlePlan(updated={id: new}))
        return settled

    async def _cancel(self, topic: str, id: str, version: int, now: int) -> Settled:
        async with self._transaction() as conn:
            st = await self._locked_state(conn, topic, id)
            settled = base.plan_cancel(id, st, version, now)
            await _apply(conn, topic, SettlePlan(deleted={id}))
        return settled

    async def _get(self, topic: str, id: str) -> Message | None:
        async with self._connection() as conn:
            params = {"topic": topic, "id": id}
            row = await (await conn.execute(sql.GET_MESSAGE, params)).fetchone()
            if row is None:
                await _require_topic(conn, topic)
                return None
        return base.message_from_row(row)

    async def _release(self, topic: str, owner: str, now: int) -> int:
        async with self._connection() as conn:
            params = {"topic": topic, "owner": owner, "now": now}
            return (await conn.execute(sql.RELEASE_OWNER, params)).rowcount

    async def _counts(self, topic: str, now: int) -> Counts:
        async with self._connection() as conn:
            exists, dead, due, leased, waiting = await _one(
                conn, sql.COUNTS, {"topic": topic, "now": now}
            )
        if not exists:
            raise NotFound(f"topic {topic!r} does not exist")
        return Counts(waiting=waiting, due=due, leased=leased, dead=dead)

    async def _list_dead(self, topic: str, after_id: str, limit: int) -> list[Message]:
        async with self._connection() as conn:
            params = {"topic": topic, "after_id": after_id, "limit": limit}
            rows = await _all(conn, sql.LIST_DEAD, params)
            if not rows:
                await _require_topic(conn, topic)
        return [base.message_from_row(row) for row in rows]

    async def _redrive(self, topic: str, ids: Sequence[str] | None, at: int) -> int:
        async with self._connection() as conn:
            if ids is None:
                cur = await conn.execute(sql.REDRIVE_ALL, {"topic": topic, "at": at})
            else:
                params = {"topic": topic, "at": at, "ids": list(ids)}
                cur = await conn.execute(sql.REDRIVE_IDS, params)
            if cur.rowcount == 0:
                await _require_topic(conn, topic)
            return cur.rowcount

    async def _purge_dead(self, topic: str, died_before: int) -> int:
        async with self._connection() as conn:
            params = {"topic": topic, "died_before": died_before}
            (count,) = await _one(conn, sql.PURGE_DEAD, params)
            if count == 0:
                await _require_topic(conn, topic)
        return int(count)
