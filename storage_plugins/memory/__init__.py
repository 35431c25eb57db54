"""The in-process backend (``memory://``)."""

import dejaq.core.hotpath  # noqa: F401  (first: DEJAQ_PURE_PYTHON chooses the .py files)
from dejaq.storage_plugins.memory.storage import MemoryStorage

__all__ = ["MemoryStorage"]
