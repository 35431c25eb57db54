"""Paging through one bucket of a memory timeline by id (``Storage.scan``).

The timeline keeps no id order, so a page gathers the bucket's slots (a scan
of two byte-sized columns), names them, sorts the ids after the cursor and
reads the records of the first ``limit + 1``: O(bucket) a page, in C for all
but the naming. Enough for analytics reads, which are rare and paged big.
"""

from __future__ import annotations

import numpy as np

from dejaq.storage_plugins.base import ScanPage
from dejaq.storage_plugins.memory.columns import DEAD, LIVE
from dejaq.storage_plugins.memory.timeline import Timeline


def scan(tl: Timeline, bucket: int, after_id: str, limit: int) -> ScanPage:
    if not 0 <= bucket < tl.topic.settings.buckets:
        return ScanPage([], None)
    c = tl.cols
    used = c.used
    state = c.state[:used]
    slots = np.flatnonzero(((state == LIVE) | (state == DEAD)) & (c.bucket[:used] == bucket))
    ids, _ = c.records(slots)
    named = sorted((id, s) for id, s in zip(ids, slots.tolist(), strict=True) if id > after_id)
    return ScanPage.of([tl.message(s) for _, s in named[: limit + 1]], limit)
