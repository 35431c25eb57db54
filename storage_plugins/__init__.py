"""Storage backends, chosen by URL scheme.

Backends are imported lazily so the package imports without any optional
driver installed; a missing driver gets an install hint.
"""

from __future__ import annotations

import importlib
from urllib.parse import urlsplit

from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact
from dejaq.storage_plugins.base import Storage

# scheme -> (module, class, pip extra or None)
BACKENDS: dict[str, tuple[str, str, str | None]] = {
    "memory": ("dejaq.storage_plugins.memory.storage", "MemoryStorage", None),
    "sqlite": ("dejaq.storage_plugins.sqlite.storage", "SqliteStorage", None),
    "redis": ("dejaq.storage_plugins.redis.storage", "RedisStorage", "redis"),
    "rediss": ("dejaq.storage_plugins.redis.storage", "RedisStorage", "redis"),
    "redis+cluster": ("dejaq.storage_plugins.redis.cluster", "RedisClusterStorage", "redis"),
    "rediss+cluster": ("dejaq.storage_plugins.redis.cluster", "RedisClusterStorage", "redis"),
    "redis+sentinel": ("dejaq.storage_plugins.redis.sentinel", "RedisSentinelStorage", "redis"),
    "rediss+sentinel": ("dejaq.storage_plugins.redis.sentinel", "RedisSentinelStorage", "redis"),
    "postgresql": ("dejaq.storage_plugins.postgres.storage", "PostgresStorage", "postgres"),
    "postgres": ("dejaq.storage_plugins.postgres.storage", "PostgresStorage", "postgres"),
}


def storage_from_url(url: str) -> Storage:
    """Build (not yet open) the backend a URL names, e.g. ``sqlite:///var/dejaq.db``."""
    scheme = urlsplit(url).scheme
    if scheme not in BACKENDS:
        known = ", ".join(f"{s}://" for s in BACKENDS)
        raise InvalidArgument(f"unknown storage URL {redact(url)!r}: expected one of {known}")
    module_name, class_name, extra = BACKENDS[scheme]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f" (pip install 'dejaq-timeline[{extra}]')" if extra else ""
        raise InvalidArgument(f"storage {scheme}:// is not available: {exc}{hint}") from exc
    cls: type[Storage] = getattr(module, class_name)
    return cls(url)


__all__ = ["BACKENDS", "Storage", "storage_from_url"]
