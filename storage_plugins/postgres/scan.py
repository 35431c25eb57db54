"""Paging through one bucket by id (``Storage.scan``) on a PostgreSQL connection."""

from __future__ import annotations

from dejaq.core.errors import NotFound
from dejaq.storage_plugins import sql_base as base
from dejaq.storage_plugins.base import ScanPage
from dejaq.storage_plugins.postgres import sql
from dejaq.storage_plugins.postgres.pool import Conn


async def scan(conn: Conn, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
    params = {"topic": topic, "bucket": bucket, "after_id": after_id, "limit": limit + 1}
    rows = await (await conn.execute(sql.SCAN_BUCKET, params)).fetchall()
    if not rows and await (await conn.execute(sql.TOPIC_EXISTS, (topic,))).fetchone() is None:
        raise NotFound(f"topic {topic!r} does not exist")
    return ScanPage.of([base.message_from_row(row) for row in rows], limit)
