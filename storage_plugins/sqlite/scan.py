"""Paging through one bucket by id (``Storage.scan``) on a SQLite connection."""

from __future__ import annotations

import sqlite3

from dejaq.core.errors import NotFound
from dejaq.storage_plugins import sql_base as base
from dejaq.storage_plugins.base import ScanPage
from dejaq.storage_plugins.sqlite import sql


def scan(conn: sqlite3.Connection, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
    if conn.execute(sql.TOPIC_BUCKETS, (topic,)).fetchone() is None:
        raise NotFound(f"topic {topic!r} does not exist")
    rows = conn.execute(sql.SCAN_BUCKET, (topic, bucket, after_id, limit + 1)).fetchall()
    return ScanPage.of([base.message_from_row(row) for row in rows], limit)
