"""Buckets: the id -> bucket hash, and the bucket sets that storage calls take."""

from __future__ import annotations

import zlib
from collections.abc import Collection

Buckets = Collection[int] | None  # None = every bucket of the topic


def bucket_of(message_id: str, buckets: int) -> int:
    """``crc32(id) mod buckets``: stable across processes and languages."""
    return zlib.crc32(message_id.encode()) % buckets
