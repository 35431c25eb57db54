"""Opening the broker's storage at start-up, waiting while it is not ready.

A storage that cannot take the broker's first calls yet — a server still
starting, a fresh Redis Cluster whose replicas are still syncing (with
``wait_replicas``, its first write is refused until one is), a failover under
way — says so with ``StorageUnavailable``. The broker then does not exit: it
logs why and tries again after a jittered pause that doubles up to
``MAX_PAUSE_S`` (``core/backoff.py``), until the storage opens. Anything else
(a bad URL, a store of another format, credentials refused: ``StorageRefused``)
still stops it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from dejaq.core.backoff import Backoff
from dejaq.core.errors import DejaqError, StorageRefused, StorageUnavailable
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import Storage

log = logging.getLogger(__name__)

FIRST_PAUSE_S = 0.2
MAX_PAUSE_S = 5.0
BACKOFF = Backoff(FIRST_PAUSE_S, MAX_PAUSE_S)


async def open_storage(url: str) -> Storage:
    """The storage of ``url``, opened, once it is ready (a fresh instance a try)."""
    attempt = 0
    while True:
        storage = storage_from_url(url)
        pause = BACKOFF.delay(attempt)
        try:
            await storage.open()
        except asyncio.CancelledError:  # the broker stopped while it waited
            with contextlib.suppress(DejaqError):
                await storage.close()
            raise
        except StorageRefused:  # credentials refused: waiting does not help
            with contextlib.suppress(DejaqError):
                await storage.close()
            raise
        except StorageUnavailable as exc:
            with contextlib.suppress(DejaqError):
                await storage.close()
            log.warning("storage not ready, retrying in %.1f s: %s", pause, exc)
        else:
            return storage
        await asyncio.sleep(pause)
        attempt += 1
