"""Buckets: the id -> bucket hash, and the bucket sets that storage calls take."""

from __future__ import annotations

import zlib
from collections.abc import Collection

Buckets = Collection[int] | None  # None = every bucket of the topic


def bucket_of(message_id: str, buckets: int) -> int:
    """``crc32(id) mod buckets``: stable across processes and languages."""
    return zlib.crc32(message_id.encode()) % buckets


def buckets_of(message_ids: list[str], buckets: int) -> list[int]:
    """``bucket_of`` for a whole batch, without a call per id."""
    crc32 = zlib.crc32
    return [crc32(mid.encode()) % buckets for mid in message_ids]
