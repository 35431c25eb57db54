"""glibc's allocator told to give large buffers back to the OS when freed.

glibc serves a large allocation with its own ``mmap`` and returns it on free,
but only above a threshold that it raises, up to 32 MiB, to the size of each
such block freed. After one large frame (a 30 MB produce frame refused as
garbage: gRPC's buffer, the request's bytes, the parsed copy) the next ones
come from the heap instead, and a heap keeps what it was given: a broker sent
8 frames of 30 MB held about 170 MiB more than before them for good
(``benchmarks/held_memory.py``). Fixing the threshold keeps every block of
``MMAP_THRESHOLD`` or more on ``mmap``, so it goes back the moment it is
freed; the blocks below it are the broker's everyday ones, reused in the heap.

A threshold given in the environment (``MALLOC_MMAP_THRESHOLD_``, glibc's
own) is left as given. Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os

log = logging.getLogger(__name__)

MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number, from glibc's malloc.h
ENV = "MALLOC_MMAP_THRESHOLD_"


def give_back_large_blocks(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``threshold`` bytes; whether it was set."""
    if ENV in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter runs on
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to set
        return False
    if mallopt(_M_MMAP_THRESHOLD, threshold) != 1:
        log.warning("mallopt refused an mmap threshold of %d bytes", threshold)
        return False
    return True
