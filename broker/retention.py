"""Purge dead messages older than their topic's retention."""

from __future__ import annotations

import asyncio
import logging

from dejaq.core.clock import now_ms
from dejaq.core.errors import DejaqError
from dejaq.storage_plugins.base import Storage

log = logging.getLogger(__name__)


async def sweep_forever(storage: Storage, interval_ms: int) -> None:
    while True:
        await asyncio.sleep(interval_ms / 1000)
        try:
            await sweep(storage)
        except DejaqError as exc:
            log.warning("retention sweep failed: %s", exc)
        except Exception:  # the sweeper must outlive any one bad sweep
            log.exception("retention sweep failed")


async def sweep(storage: Storage) -> int:
    purged = 0
    now = now_ms()
    for topic in await storage.list_topics():
        retention = topic.settings.dead_retention_ms
        if retention:
            purged += await storage.purge_dead(topic.name, max(0, now - retention))
    return purged
