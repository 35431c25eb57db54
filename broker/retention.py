"""The retention sweep: purge dead messages older than their topic's retention,
and tombstones older than their topic's dedup window."""

from __future__ import annotations

import asyncio
import logging

from dejaq.broker.tasks import pause
from dejaq.core.clock import now_ms
from dejaq.core.errors import DejaqError
from dejaq.storage_plugins.base import Storage

log = logging.getLogger(__name__)

# Tombstones forgotten per storage call: a sweep after a day of heavy acking
# has millions to forget, and no single call may hold the storage for long.
TOMBSTONE_BATCH = 5_000


async def sweep_forever(storage: Storage, interval_ms: int) -> None:
    while True:
        await pause(interval_ms / 1000)
        try:
            await sweep(storage)
        except DejaqError as exc:
            log.warning("retention sweep failed: %s", exc)
        except Exception:  # the sweeper must outlive any one bad sweep
            log.exception("retention sweep failed")


async def sweep(storage: Storage, batch: int = TOMBSTONE_BATCH) -> int:
    """One pass over every topic; how many dead messages and tombstones went."""
    purged = 0
    now = now_ms()
    for topic in await storage.list_topics():
        retention = topic.settings.dead_retention_ms
        if retention:
            purged += await storage.purge_dead(topic.name, max(0, now - retention))
        window = topic.settings.dedup_window_ms
        if window:
            purged += await purge_tombstones(storage, topic.name, max(0, now - window), batch)
    return purged


async def purge_tombstones(storage: Storage, topic: str, deleted_before: int, batch: int) -> int:
    """Forget a topic's tombstones deleted before ``deleted_before``, ``batch`` at a
    time, letting other work run between batches."""
    forgotten = 0
    while True:
        n = await storage.purge_tombstones(topic, deleted_before, batch)
        forgotten += n
        if n < batch:
            return forgotten
        await asyncio.sleep(0)
