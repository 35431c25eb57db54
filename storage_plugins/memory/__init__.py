"""The in-process backend (``memory://``)."""

from dejaq.storage_plugins.memory.storage import MemoryStorage

__all__ = ["MemoryStorage"]
