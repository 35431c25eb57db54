"""What each storage call does on a SQLite connection.

Plain functions of a connection, run by the writer thread inside a savepoint
of a group transaction (see ``sqlite_writer``), so each one is atomic: they
read, decide with ``rules``, and write, with no locking of their own.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sqlite3
from collections.abc import Sequence
from typing import Any, NamedTuple

from dejaq.core.errors import AlreadyExists, DejaqError, NotFound
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
from dejaq.storage_plugins import sqlite_sql as sql
from dejaq.storage_plugins.base import Buckets, Outcome, SettleItem
from dejaq.storage_plugins.rules import check_holder, check_movable, dies_on_lease

Conn = sqlite3.Connection


class _State(NamedTuple):
    """A message's mutable metadata, as ``sql.STATE`` selects it."""

    ts: int
    version: int
    deliveries: int
    owner: str | None
    max_deliveries: int
    dead: int


# -- helpers ------------------------------------------------------------------


def _topic_buckets(conn: Conn, topic: str) -> int:
    """The topic's bucket count; ``NotFound`` when there is no such topic."""
    row = conn.execute(sql.TOPIC_BUCKETS, (topic,)).fetchone()
    if row is None:
        raise NotFound(f"topic {topic!r} does not exist")
    return int(row[0])


@functools.lru_cache(maxsize=64)
def _all_buckets(count: int) -> str:
    return json.dumps(list(range(count)))


def _buckets_json(buckets: Buckets, count: int) -> str:
    if buckets is None:
        return _all_buckets(count)
    return json.dumps([int(b) for b in buckets])


def _state(conn: Conn, topic: str, id: str) -> _State | None:
    row = conn.execute(sql.STATE, (topic, id)).fetchone()
    return _State(*row) if row is not None else None


def _held(conn: Conn, topic: str, id: str, version: int, owner: str) -> _State | DejaqError:
    st = _state(conn, topic, id)
    live = st is not None and not st.dead
    err = check_holder(id, live, st.owner if st else None, st.version if st else 0, owner, version)
    if err is not None:
        return err
    assert st is not None
    return st


def _movable(conn: Conn, topic: str, id: str, version: int, now: int) -> _State:
    _topic_buckets(conn, topic)
    st = _state(conn, topic, id)
    live = st is not None and not st.dead
    err = check_movable(
        id,
        live,
        st.owner if st else None,
        st.ts if st else 0,
        st.version if st else 0,
        version,
        now,
    )
    if err is not None:
        raise err
    assert st is not None
    return st


def _message(row: Any) -> Message:
    """A ``sql.GET_MESSAGE`` / ``sql.LIST_DEAD`` row: the columns of ``Message`` in order."""
    id, ts, payload, version, deliveries, owner, bucket, md, expires_at, dead = row
    return Message(id, ts, payload, version, deliveries, owner, bucket, md, expires_at, bool(dead))


def _delete(conn: Conn, keys: list[tuple[str, str]]) -> None:
    conn.executemany(sql.DELETE_MESSAGE, keys)
    conn.executemany(sql.DELETE_PAYLOAD, keys)


# -- topics -------------------------------------------------------------------


def _topic(row: tuple[str, str, int]) -> Topic:
    name, settings, created_at_ms = row
    return Topic(name, TopicSettings(**json.loads(settings)), created_at_ms)


def create_topic(conn: Conn, topic: Topic) -> None:
    settings = json.dumps(dataclasses.asdict(topic.settings))
    cur = conn.execute(sql.INSERT_TOPIC, (topic.name, settings, topic.created_at_ms))
    if cur.rowcount == 0:
        raise AlreadyExists(f"topic {topic.name!r} already exists")


def delete_topic(conn: Conn, name: str) -> None:
    if conn.execute(sql.DELETE_TOPIC, (name,)).rowcount == 0:
        raise NotFound(f"topic {name!r} does not exist")
    conn.execute(sql.DELETE_TOPIC_MESSAGES, (name,))
    conn.execute(sql.DELETE_TOPIC_PAYLOADS, (name,))


def get_topic(conn: Conn, name: str) -> Topic | None:
    row = conn.execute(sql.GET_TOPIC, (name,)).fetchone()
    return _topic(row) if row is not None else None


def list_topics(conn: Conn) -> list[Topic]:
    return [_topic(row) for row in conn.execute(sql.LIST_TOPICS)]


# -- messages -----------------------------------------------------------------


def insert(conn: Conn, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]:
    _topic_buckets(conn, topic)
    ids = json.dumps([m.id for m in messages])
    taken = {row[0] for row in conn.execute(sql.EXISTING_IDS, (topic, ids))}
    out: list[InsertStatus] = []
    fresh: list[NewMessage] = []
    for m in messages:
        if m.id in taken:
            out.append(InsertStatus.DUPLICATE)
            continue
        taken.add(m.id)  # the first of a repeated id wins
        fresh.append(m)
        out.append(InsertStatus.ACCEPTED)
    conn.executemany(
        sql.INSERT_MESSAGE,
        [(topic, m.id, m.bucket, m.timestamp, m.max_deliveries, m.expires_at) for m in fresh],
    )
    conn.executemany(sql.INSERT_PAYLOAD, [(topic, m.id, m.payload) for m in fresh])
    return out


def lease(
    conn: Conn,
    topic: str,
    buckets: Buckets,
    now: int,
    limit: int,
    lease_ms: int,
    owner: str,
    max_deliveries: int,
) -> Leases:
    wanted = _buckets_json(buckets, _topic_buckets(conn, topic))
    until = now + lease_ms
    out: list[Delivery] = []
    dead = 0
    # Dead letters do not use up the limit: select again until it is reached
    # or nothing due is left.
    while len(out) < limit:
        asked = limit - len(out)
        rows = conn.execute(sql.DUE, (topic, now, wanted, asked)).fetchall()
        taken: list[tuple[int, str, str, str]] = []
        dropped: list[tuple[str, str]] = []
        killed: list[tuple[int, str, str]] = []
        for id, ts, version, deliveries, own_max, expires_at in rows:
            md = own_max or max_deliveries
            if dies_on_lease(deliveries, md, expires_at, now):
                killed.append((now, topic, id))
                continue
            payload = conn.execute(sql.GET_PAYLOAD, (topic, id)).fetchone()[0]
            out.append(Delivery(id, ts, payload, version + 1, deliveries + 1))
            if md == 1:  # at-most-once: gone once delivered
                dropped.append((topic, id))
            else:
                taken.append((until, owner, topic, id))
        conn.executemany(sql.KILL, killed)
        conn.executemany(sql.TAKE, taken)
        _delete(conn, dropped)
        dead += len(killed)
        if not killed or len(rows) < asked:
            break
    return Leases(out, until, dead)


def next_due(conn: Conn, topic: str, buckets: Buckets) -> int | None:
    wanted = _buckets_json(buckets, _topic_buckets(conn, topic))
    row = conn.execute(sql.NEXT_DUE, (topic, wanted)).fetchone()
    return int(row[0]) if row is not None else None


def ack(conn: Conn, topic: str, items: Sequence[SettleItem], owner: str) -> list[Outcome]:
    _topic_buckets(conn, topic)
    out: list[Outcome] = []
    for id, version in items:
        st = _held(conn, topic, id, version, owner)
        if isinstance(st, DejaqError):
            out.append(st)
            continue
        _delete(conn, [(topic, id)])
        out.append(Settled(id, 0, st.ts))
    return out


def extend(
    conn: Conn, topic: str, items: Sequence[SettleItem], owner: str, until: int
) -> list[Outcome]:
    _topic_buckets(conn, topic)
    out: list[Outcome] = []
    for id, version in items:
        st = _held(conn, topic, id, version, owner)
        if isinstance(st, DejaqError):
            out.append(st)
            continue
        conn.execute(sql.EXTEND, (until, topic, id))
        out.append(Settled(id, st.version + 1, until))
    return out


def nack(
    conn: Conn,
    topic: str,
    items: Sequence[SettleItem],
    owner: str,
    at: int,
    max_deliveries: int,
) -> list[Outcome]:
    _topic_buckets(conn, topic)
    out: list[Outcome] = []
    for id, version in items:
        st = _held(conn, topic, id, version, owner)
        if isinstance(st, DejaqError):
            out.append(st)
            continue
        md = st.max_deliveries or max_deliveries
        if md and st.deliveries >= md:
            conn.execute(sql.KILL, (at, topic, id))
            out.append(Settled(id, 0, at))
            continue
        conn.execute(sql.RESCHEDULE, (at, topic, id))
        out.append(Settled(id, st.version + 1, at))
    return out


def move(conn: Conn, topic: str, id: str, version: int, at: int, now: int) -> Settled:
    st = _movable(conn, topic, id, version, now)
    conn.execute(sql.RESCHEDULE, (at, topic, id))
    return Settled(id, st.version + 1, at)


def cancel(conn: Conn, topic: str, id: str, version: int, now: int) -> Settled:
    st = _movable(conn, topic, id, version, now)
    _delete(conn, [(topic, id)])
    return Settled(id, 0, st.ts)


def get(conn: Conn, topic: str, id: str) -> Message | None:
    _topic_buckets(conn, topic)
    row = conn.execute(sql.GET_MESSAGE, (topic, id)).fetchone()
    return _message(row) if row is not None else None


def release(conn: Conn, topic: str, owner: str, now: int) -> int:
    return conn.execute(sql.RELEASE_OWNER, (now, topic, owner)).rowcount


def counts(conn: Conn, topic: str, now: int) -> Counts:
    _topic_buckets(conn, topic)
    dead, due, leased, waiting = conn.execute(sql.COUNTS, (now, topic)).fetchone()
    return Counts(waiting=waiting, due=due, leased=leased, dead=dead)


def list_dead(conn: Conn, topic: str, after_id: str, limit: int) -> list[Message]:
    _topic_buckets(conn, topic)
    return [_message(row) for row in conn.execute(sql.LIST_DEAD, (topic, after_id, limit))]


def redrive(conn: Conn, topic: str, ids: Sequence[str] | None, at: int) -> int:
    _topic_buckets(conn, topic)
    if ids is None:
        return conn.execute(sql.REDRIVE_ALL, (at, topic)).rowcount
    return conn.executemany(sql.REDRIVE_ONE, [(at, topic, id) for id in ids]).rowcount


def purge_dead(conn: Conn, topic: str, died_before: int) -> int:
    _topic_buckets(conn, topic)
    conn.execute(sql.PURGE_DEAD_PAYLOADS, (topic, died_before))
    return conn.execute(sql.PURGE_DEAD_MESSAGES, (topic, died_before)).rowcount
