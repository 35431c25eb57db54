"""A backend's storage opened from its URL for a story, and closed after: what
the stories of one backend share (``opened`` in each)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TypeVar

from dejaq.storage_plugins import Storage, storage_from_url

S = TypeVar("S", bound=Storage)


@asynccontextmanager
async def opened_as(kind: type[S], url: str) -> AsyncIterator[S]:
    """The storage of ``url``, a ``kind``, opened for the block and closed after."""
    storage = storage_from_url(url)
    assert isinstance(storage, kind)
    await storage.open()
    try:
        yield storage
    finally:
        await storage.close()
