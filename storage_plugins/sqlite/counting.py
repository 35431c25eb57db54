"""A topic's counts by state, from its live and dead counts (``topic_counts``,
added to by every write in its transaction) and two range counts of what is
due or leased now: a read as long as what is due and held, never one of every
message of the topic."""

from __future__ import annotations

import functools
import json
import sqlite3

from dejaq.core.model import Counts
from dejaq.storage_plugins.sqlite import sql


@functools.lru_cache(maxsize=64)
def all_buckets(count: int) -> str:
    """Every bucket of a topic of ``count`` buckets, as a JSON array parameter."""
    return json.dumps(list(range(count)))


def counted(
    conn: sqlite3.Connection, topic: str, buckets: str, live: int, dead: int, now: int
) -> Counts:
    """The counts by state at ``now`` of a topic holding ``live`` and ``dead``
    messages, over ``buckets`` (every bucket of it, ``all_buckets``)."""
    (due,) = conn.execute(sql.DUE_COUNT, (topic, now, buckets)).fetchone()
    (leased,) = conn.execute(sql.LEASED_COUNT, (topic, now)).fetchone()
    return Counts(waiting=live - due - leased, due=due, leased=leased, dead=dead)


def live_dead(conn: sqlite3.Connection, topic: str) -> tuple[int, int]:
    """The topic's live and dead counts (0 and 0 before its first message)."""
    row = conn.execute(sql.LIVE_DEAD, (topic,)).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))
