"""What each storage call does on a SQLite connection.

Plain functions of a connection, run by the writer thread inside a savepoint
of a group transaction (see ``writer``), so each one is atomic: they
read, let ``sql_base`` decide (the planners shared with postgresql://), and
write, with no locking of their own.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Iterable, Mapping, Sequence

from dejaq.core import priority as prio
from dejaq.core.buckets import Buckets
from dejaq.core.errors import AlreadyExists, InvalidArgument, NotFound
from dejaq.core.model import (
    KIND_PRIORITY,
    Counts,
    InsertStatus,
    LeasedMessage,
    Leases,
    Message,
    NewMessage,
    Settled,
    Topic,
)
from dejaq.storage_plugins import sql_base as base
from dejaq.storage_plugins.base import Forecast, HandBack, LeaseRequest, Outcome, SettleItem
from dejaq.storage_plugins.sql_base import RowState
from dejaq.storage_plugins.sqlite import sql
from dejaq.storage_plugins.sqlite.counting import all_buckets, counted, live_dead

Conn = sqlite3.Connection


# -- helpers ------------------------------------------------------------------


def identity(conn: Conn) -> str:
    """The random id the database was given when it was created."""
    row = conn.execute(sql.GET_IDENTITY).fetchone()
    if row is None:
        raise NotFound("the database has no identity")
    return str(row[0])


def _topic_buckets(conn: Conn, topic: str) -> int:
    """The topic's bucket count; ``NotFound`` when there is no such topic."""
    row = conn.execute(sql.TOPIC_BUCKETS, (topic,)).fetchone()
    if row is None:
        raise NotFound(f"topic {topic!r} does not exist")
    return int(row[0])


def _buckets_json(buckets: Buckets, count: int) -> str:
    if buckets is None:
        return all_buckets(count)
    return json.dumps([int(b) for b in buckets])


def _ids(ids: Iterable[str]) -> str:
    return json.dumps(list(ids))


def _states(conn: Conn, topic: str, ids: Iterable[str]) -> dict[str, RowState]:
    """The states of the ids that exist, in one statement."""
    return {row[0]: RowState(*row[1:]) for row in conn.execute(sql.STATES, (topic, _ids(ids)))}


def _count(conn: Conn, topic: str, live: int, dead: int) -> None:
    """Add what a write changed to the topic's live and dead counts, in its transaction."""
    if live or dead:
        conn.execute(sql.ADD_COUNTS, (topic, live, dead))


def _delete(conn: Conn, topic: str, ids: Collection[str], now: int) -> None:
    """Delete live messages (ack, cancel, at-most-once delivery); with the topic's
    dedup window, their tombstones, deleted at ``now``, in the same transaction."""
    if ids:
        keys = (topic, _ids(ids))
        _count(conn, topic, -conn.execute(sql.DELETE_MESSAGES, keys).rowcount, 0)
        conn.execute(sql.DELETE_PAYLOADS, keys)
        window = conn.execute(sql.TOPIC_DEDUP_WINDOW, (topic,)).fetchone()
        if window is not None and window[0]:
            conn.execute(sql.BURY, (topic, now, keys[1]))


def _store(conn: Conn, topic: str, states: Mapping[str, RowState]) -> None:
    """Write the planned states of live messages (a dead one is killed by it)."""
    rows = [
        (st.ts, st.version, st.deliveries, st.owner, int(st.dead), topic, id)
        for id, st in states.items()
    ]
    conn.executemany(sql.SET_STATE, rows)
    killed = sum(1 for st in states.values() if st.dead)
    _count(conn, topic, -killed, killed)


def _apply(conn: Conn, topic: str, plan: base.SettlePlan, now: int = 0) -> list[Outcome]:
    _delete(conn, topic, plan.deleted, now)
    _store(conn, topic, plan.updated)
    return plan.outcomes


# -- topics -------------------------------------------------------------------


def create_topic(conn: Conn, topic: Topic, limit: int) -> bool:
    """Create the topic once the rows of a deleted one of its name are gone:
    False (nothing created) while ``purge_chunk`` still found rows to remove."""
    if not purge_chunk(conn, topic.name, limit):
        return False
    cur = conn.execute(
        sql.INSERT_TOPIC, (topic.name, base.settings_json(topic), topic.created_at_ms)
    )
    if cur.rowcount == 0:
        raise AlreadyExists(f"topic {topic.name!r} already exists")
    return True


def delete_topic(conn: Conn, name: str) -> None:
    """Delete the topic at once; its rows are left for ``purge_chunk``, so a
    large topic does not hold the write lock for as long as it takes to remove."""
    if conn.execute(sql.DELETE_TOPIC, (name,)).rowcount == 0:
        raise NotFound(f"topic {name!r} does not exist")
    conn.execute(sql.DELETE_TOPIC_COUNTS, (name,))
    conn.execute(sql.DOOM_TOPIC, (name,))


def doomed_topics(conn: Conn) -> list[str]:
    """Deleted topics whose rows are not all removed yet."""
    return [row[0] for row in conn.execute(sql.DOOMED_TOPICS)]


def purge_chunk(conn: Conn, name: str, limit: int) -> bool:
    """Remove up to ``limit`` rows of each table of a deleted topic; True when
    none are left (the topic is then no longer doomed). A topic not doomed
    has none: it costs one lookup."""
    if conn.execute(sql.IS_DOOMED, (name,)).fetchone() is None:
        return True
    statements = (sql.PURGE_MESSAGES, sql.PURGE_PAYLOADS, sql.PURGE_TOPIC_TOMBSTONES)
    removed = [conn.execute(statement, (name, limit)).rowcount for statement in statements]
    if max(removed) >= limit:
        return False  # a full chunk: there may be more
    conn.execute(sql.SPARE_TOPIC, (name,))
    return True


def update_topic(conn: Conn, topic: Topic) -> bool:
    params = (base.settings_json(topic), topic.name, topic.created_at_ms)
    return conn.execute(sql.UPDATE_TOPIC, params).rowcount == 1


def get_topic(conn: Conn, name: str) -> Topic | None:
    row = conn.execute(sql.GET_TOPIC, (name,)).fetchone()
    return base.topic_from_row(row) if row is not None else None


def list_topics(conn: Conn) -> list[Topic]:
    return [base.topic_from_row(row) for row in conn.execute(sql.LIST_TOPICS)]


# -- messages -----------------------------------------------------------------


def insert(conn: Conn, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]:
    _topic_buckets(conn, topic)
    ids = json.dumps([m.id for m in messages])
    taken = [row[0] for row in conn.execute(sql.EXISTING_IDS, (topic, ids))]
    out, fresh = base.plan_insert(messages, taken)
    conn.executemany(
        sql.INSERT_MESSAGE,
        [
            (topic, m.id, m.bucket, m.timestamp, m.max_deliveries, m.expires_at, m.priority)
            for m in fresh
        ],
    )
    conn.executemany(sql.INSERT_PAYLOAD, [(topic, m.id, m.payload) for m in fresh])
    _count(conn, topic, len(fresh), 0)
    return out


def lease(conn: Conn, request: LeaseRequest) -> Leases:
    topic, now = request.topic, request.now
    wanted = _buckets_json(request.buckets, _topic_buckets(conn, topic))
    out: list[LeasedMessage] = []
    dead = 0
    # Dead letters do not use up the limit: select again until it is reached
    # or nothing due is left.
    while len(out) < request.limit:
        asked = request.limit - len(out)
        rows = conn.execute(sql.DUE, (topic, request.bound, wanted, asked, topic)).fetchall()
        plan = base.plan_lease((base.Due(*row[:7]) for row in rows), now, request.max_deliveries)
        payloads = {row[0]: row[7] for row in rows}
        out += [base.delivery(row, payloads[row.id]) for row in plan.deliver]
        conn.executemany(sql.KILL, [(now, topic, id) for id in plan.kill])
        _count(conn, topic, -len(plan.kill), len(plan.kill))
        until, owner = request.until, request.owner
        conn.executemany(sql.TAKE, [(until, owner, topic, id) for id in plan.keep])
        _delete(conn, topic, plan.drop, now)
        dead += len(plan.kill)
        if not plan.kill or len(rows) < asked:
            break
    return Leases(out, request.until, dead)


def promote(conn: Conn, topic: str, buckets: Buckets, now: int, limit: int) -> int:
    row = conn.execute(sql.GET_TOPIC, (topic,)).fetchone()
    if row is None:
        raise NotFound(f"topic {topic!r} does not exist")
    stored = base.topic_from_row(row)
    if stored.settings.kind != KIND_PRIORITY:
        raise InvalidArgument(f"topic {topic!r} is a timeline: only a priority topic promotes")
    params = {
        "topic": topic,
        "now": now,
        "buckets": _buckets_json(buckets, stored.settings.buckets),
        "limit": limit,
        "step": prio.step(stored),
        "created_at": stored.created_at_ms,
        "base": prio.RANK_BASE,
    }
    return conn.execute(sql.PROMOTE, params).rowcount


def next_due(conn: Conn, topic: str, buckets: Buckets) -> int | None:
    wanted = _buckets_json(buckets, _topic_buckets(conn, topic))
    row = conn.execute(sql.NEXT_DUE, (topic, wanted)).fetchone()
    return int(row[0]) if row is not None else None


def _held(conn: Conn, topic: str, items: Sequence[SettleItem]) -> dict[str, RowState]:
    _topic_buckets(conn, topic)
    return _states(conn, topic, {id for id, _ in items})


def ack(conn: Conn, topic: str, items: Sequence[SettleItem], owner: str, now: int) -> list[Outcome]:
    states = _held(conn, topic, items)
    return _apply(conn, topic, base.plan_ack(items, states, owner), now)


def extend(
    conn: Conn, topic: str, items: Sequence[SettleItem], owner: str, until: int
) -> list[Outcome]:
    states = _held(conn, topic, items)
    return _apply(conn, topic, base.plan_extend(items, states, owner, until))


def nack(
    conn: Conn,
    topic: str,
    items: Sequence[SettleItem],
    owner: str,
    at: int,
    max_deliveries: int,
) -> list[Outcome]:
    states = _held(conn, topic, items)
    return _apply(conn, topic, base.plan_nack(items, states, owner, at, max_deliveries))


def hand_back(conn: Conn, topic: str, items: Sequence[HandBack], owner: str) -> list[Outcome]:
    states = _held(conn, topic, [(id, version) for id, version, _ in items])
    return _apply(conn, topic, base.plan_hand_back(items, states, owner))


def move(
    conn: Conn,
    topic: str,
    id: str,
    version: int,
    at: int,
    now: int,
    payload: bytes | None,
    priority: int | None,
) -> Settled:
    _topic_buckets(conn, topic)
    states = _states(conn, topic, [id])
    settled, new = base.plan_move(id, states.get(id), version, at, now)
    _store(conn, topic, {id: new})
    if payload is not None:
        conn.execute(sql.SET_PAYLOAD, (payload, topic, id))
    if priority is not None:
        conn.execute(sql.SET_PRIORITY, (priority, topic, id))
    return settled


def cancel(conn: Conn, topic: str, id: str, version: int, now: int) -> Settled:
    _topic_buckets(conn, topic)
    settled = base.plan_cancel(id, _states(conn, topic, [id]).get(id), version, now)
    _delete(conn, topic, [id], now)
    return settled


def get(conn: Conn, topic: str, id: str) -> Message | None:
    _topic_buckets(conn, topic)
    row = conn.execute(sql.GET_MESSAGE, (topic, id)).fetchone()
    return base.message_from_row(row) if row is not None else None


def release(conn: Conn, topic: str, owner: str, now: int) -> int:
    if conn.execute(sql.TOPIC_BUCKETS, (topic,)).fetchone() is None:
        return 0  # a deleted topic's rows may still be there, being removed
    return conn.execute(sql.RELEASE_OWNER, (now, topic, owner)).rowcount


def counts(conn: Conn, topic: str, now: int) -> Counts:
    buckets = all_buckets(_topic_buckets(conn, topic))
    return counted(conn, topic, buckets, *live_dead(conn, topic), now)


def forecast(conn: Conn, topic: str, request: Forecast) -> list[int]:
    buckets = all_buckets(_topic_buckets(conn, topic))
    params = (request.now, request.step_ms, topic, buckets, request.bins)
    return base.binned(conn.execute(sql.FORECAST, params).fetchall(), request.bins)


def list_dead(conn: Conn, topic: str, after_id: str, limit: int) -> list[Message]:
    _topic_buckets(conn, topic)
    return [
        base.message_from_row(row) for row in conn.execute(sql.LIST_DEAD, (topic, after_id, limit))
    ]


def by_due(conn: Conn, topic: str, after: tuple[int, str] | None, limit: int) -> list[Message]:
    buckets = all_buckets(_topic_buckets(conn, topic))
    at, id = base.FIRST if after is None else after
    rows = conn.execute(sql.BY_DUE, (topic, buckets, at, id, limit))
    return [base.message_from_row(row) for row in rows]


def redrive(conn: Conn, topic: str, ids: Sequence[str] | None, at: int) -> int:
    _topic_buckets(conn, topic)
    if ids is None:
        redriven = conn.execute(sql.REDRIVE_ALL, (at, topic)).rowcount
    else:
        redriven = conn.execute(sql.REDRIVE_IDS, (at, topic, _ids(ids))).rowcount
    _count(conn, topic, redriven, -redriven)
    return redriven


def purge_dead(conn: Conn, topic: str, died_before: int) -> int:
    _topic_buckets(conn, topic)
    conn.execute(sql.PURGE_DEAD_PAYLOADS, (topic, died_before))
    purged = conn.execute(sql.PURGE_DEAD_MESSAGES, (topic, died_before)).rowcount
    _count(conn, topic, 0, -purged)
    return purged


def forget_tombstones(conn: Conn, topic: str, ids: Sequence[str]) -> int:
    _topic_buckets(conn, topic)
    return conn.execute(sql.FORGET_TOMBSTONES, (topic, _ids(ids))).rowcount


def purge_tombstones(conn: Conn, topic: str, deleted_before: int, limit: int) -> int:
    _topic_buckets(conn, topic)
    return conn.execute(sql.PURGE_TOMBSTONES, (topic, deleted_before, limit)).rowcount
