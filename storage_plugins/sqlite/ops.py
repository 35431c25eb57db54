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
from typing import Any

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
    OnDuplicate,
    Settled,
    Topic,
)
from dejaq.storage_plugins import sql_base as base
from dejaq.storage_plugins.base import (
    Forecast,
    HandBack,
    KeyLoad,
    LeaseRequest,
    Outcome,
    SettleItem,
)
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


def _lower_lanes(conn: Conn, topic: str, ids: Iterable[str]) -> None:
    """After a write that may have put live keyed messages earlier: their lanes'
    heads lowered to them (a head may be early, never late)."""
    conn.execute(sql.LOWER_LANES, (topic, _ids(ids)))


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
    statements = (
        sql.PURGE_MESSAGES,
        sql.PURGE_PAYLOADS,
        sql.PURGE_TOPIC_TOMBSTONES,
        sql.PURGE_LANES,
    )
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
    _insert_fresh(conn, topic, fresh)
    return out


def debounce(
    conn: Conn, topic: str, messages: Sequence[NewMessage], mode: OnDuplicate, now: int
) -> list[InsertStatus]:
    _topic_buckets(conn, topic)
    ids = [m.id for m in messages]
    buried = [row[0] for row in conn.execute(sql.TOMBSTONED_IDS, (topic, json.dumps(ids)))]
    plan = base.plan_debounce(messages, _states(conn, topic, ids), buried, mode, now)
    conn.executemany(
        sql.REPLACE_MESSAGE,
        [
            (m.bucket, m.timestamp, m.max_deliveries, m.expires_at, m.priority, m.key, topic, m.id)
            for m in plan.replaced
        ],
    )
    conn.executemany(
        sql.REPLACE_PAYLOAD, [(m.payload, m.headers, topic, m.id) for m in plan.replaced]
    )
    conn.executemany(sql.EXTEND_MESSAGE, [(m.timestamp, topic, m.id) for m in plan.extended])
    if plan.changed:
        _lower_lanes(conn, topic, plan.changed)  # a head may be early, never late
    _insert_fresh(conn, topic, plan.fresh)
    return plan.statuses


def _insert_fresh(conn: Conn, topic: str, fresh: Sequence[NewMessage]) -> None:
    """Store messages whose ids are free, with their lanes and counts."""
    conn.executemany(
        sql.INSERT_MESSAGE,
        [
            (topic, m.id, m.bucket, m.timestamp, m.max_deliveries, m.expires_at, m.priority, m.key)
            for m in fresh
        ],
    )
    conn.executemany(sql.INSERT_PAYLOAD, [(topic, m.id, m.payload, m.headers) for m in fresh])
    lanes = base.lane_heads(fresh)
    if lanes:
        conn.executemany(sql.UPSERT_LANE, [(topic, b, k, ts) for (b, k), ts in lanes.items()])
    _count(conn, topic, len(fresh), 0)


def _take(
    conn: Conn, request: LeaseRequest, rows: list[Any], out: list[LeasedMessage]
) -> tuple[int, int]:
    """Lease, drop or kill the due rows read (``sql.DUE`` columns), as planned;
    the deliveries are added to ``out``. (delivered, dead-lettered)."""
    topic, now = request.topic, request.now
    plan = base.plan_lease((base.Due(*row[:8]) for row in rows), now, request.max_deliveries)
    stored = {row[0]: (row[8], row[9]) for row in rows}
    out += [base.delivery(row, *stored[row.id]) for row in plan.deliver]
    conn.executemany(sql.KILL, [(now, topic, id) for id in plan.kill])
    _count(conn, topic, -len(plan.kill), len(plan.kill))
    until, owner = request.until, request.owner
    conn.executemany(sql.TAKE, [(until, owner, topic, id) for id in plan.keep])
    _delete(conn, topic, plan.drop, now)
    return len(plan.deliver), len(plan.kill)


def lease(conn: Conn, request: LeaseRequest) -> Leases:
    topic = request.topic
    row = conn.execute(sql.TOPIC_SHAPE, (topic,)).fetchone()
    if row is None:
        raise NotFound(f"topic {topic!r} does not exist")
    wanted = _buckets_json(request.buckets, int(row[0]))
    lanes = []
    if row[1] != KIND_PRIORITY:  # a priority topic takes by rank alone
        lanes = conn.execute(sql.DUE_LANES, (topic, wanted, request.bound)).fetchall()
    if lanes:
        return _lease_fairly(conn, request, wanted, lanes)
    out: list[LeasedMessage] = []
    dead = 0
    # Dead letters do not use up the limit: select again until it is reached
    # or nothing due is left.
    while len(out) < request.limit:
        asked = request.limit - len(out)
        rows = conn.execute(sql.DUE, (topic, request.bound, wanted, asked, topic)).fetchall()
        _, killed = _take(conn, request, rows, out)
        dead += killed
        if not killed or len(rows) < asked:
            break
    return Leases(out, request.until, dead)


def _lease_fairly(conn: Conn, request: LeaseRequest, wanted: str, lanes: list[Any]) -> Leases:
    """A pass over a topic with keyed messages due: the limit shared among the
    keys (sql_base.FairShare), each key's earliest messages read from the
    buckets where its lanes are due, the unkeyed ones from every asked bucket."""
    topic, bound = request.topic, request.bound
    heads, buckets = base.heads_of(lanes)
    where = {key: json.dumps(sorted(b)) for key, b in buckets.items()}
    unkeyed = conn.execute(sql.KEY_HEAD, (topic, "", bound, wanted)).fetchone()
    if unkeyed is not None:
        heads[""], where[""] = unkeyed[0], wanted
    share = base.FairShare.of(request.limit, heads, request.caps)
    out: list[LeasedMessage] = []
    dead = 0
    asked_keys: set[str] = set()
    while allotment := share.allot():
        for key, asked in allotment.items():
            asked_keys.add(key)
            rows = conn.execute(sql.KEY_DUE, (topic, key, bound, where[key], asked)).fetchall()
            delivered, killed = _take(conn, request, rows, out)
            dead += killed
            share.took(key, asked, len(rows), delivered)
    # The lanes taken from have later heads now (or none): set them, so the
    # next pass does not read them again before they are due.
    touched = [(topic, b, k) for k, b, _ in lanes if k in asked_keys]
    conn.executemany(sql.FIX_LANE, touched)
    conn.execute(sql.DROP_EMPTY_LANES, (topic, wanted))
    out.sort(key=lambda d: d.timestamp)
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
    outcomes = _apply(conn, topic, base.plan_nack(items, states, owner, at, max_deliveries))
    _lower_lanes(conn, topic, states)
    return outcomes


def hand_back(conn: Conn, topic: str, items: Sequence[HandBack], owner: str) -> list[Outcome]:
    states = _held(conn, topic, [(id, version) for id, version, _ in items])
    outcomes = _apply(conn, topic, base.plan_hand_back(items, states, owner))
    _lower_lanes(conn, topic, states)
    return outcomes


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
    _lower_lanes(conn, topic, [id])
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
    conn.execute(sql.LOWER_OWNER_LANES, (topic, owner, now))
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
        conn.execute(sql.LOWER_DEAD_LANES, (topic, at))
        redriven = conn.execute(sql.REDRIVE_ALL, (at, topic)).rowcount
    else:
        redriven = conn.execute(sql.REDRIVE_IDS, (at, topic, _ids(ids))).rowcount
        _lower_lanes(conn, topic, ids)
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


def keys(conn: Conn, topic: str, now: int, limit: int) -> list[KeyLoad]:
    _topic_buckets(conn, topic)
    due = conn.execute(sql.KEYS_DUE, (topic, now)).fetchall()
    held = conn.execute(sql.KEYS_HELD, (topic, now)).fetchall()
    return base.busiest(due, held, limit)
