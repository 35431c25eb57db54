"""Paging through one bucket of a memory timeline by id (``Storage.scan``).

The timeline keeps no id order, so the first page of a bucket gathers its
slots (a scan of two byte-sized columns), names them and sorts the ids; the
order is kept (``IdOrder``) for the bucket's next pages while nothing enters
it. A page then bisects to the cursor and looks up the next ids, skipping
those that left: O(page). Reading a whole topic costs one sort per bucket.
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from dejaq.core.model import Message
from dejaq.storage_plugins.base import ScanPage
from dejaq.storage_plugins.memory.columns import DEAD, LIVE
from dejaq.storage_plugins.memory.timeline import Timeline
from dejaq.storage_plugins.memory.types import I64


def scan(tl: Timeline, bucket: int, after_id: str, limit: int) -> ScanPage:
    if not 0 <= bucket < tl.topic.settings.buckets:
        return ScanPage([], None)
    ordered = tl.id_order.get(bucket)
    if ordered is None:
        ordered = sorted(_ids_of(tl, bucket))
        tl.id_order.put(bucket, ordered)
    c = tl.cols
    found: list[Message] = []
    at = bisect_right(ordered, after_id)
    while len(found) <= limit and at < len(ordered):
        ids = ordered[at : at + limit + 1 - len(found)]
        at += len(ids)
        slots = tl.find(ids)
        held = slots[slots >= 0]
        state = c.state[held]
        here = held[((state == LIVE) | (state == DEAD)) & (c.bucket[held] == bucket)]
        found += _messages(tl, here)
    return ScanPage.of(found, limit)


def _messages(tl: Timeline, slots: I64) -> list[Message]:
    """``Timeline.message`` of each slot, a column at a time."""
    c = tl.cols
    ids, payloads = c.records(slots)
    keys, headers = c.extras(slots)
    names = tl.owners.names
    return [
        Message(id, ts, payload, v, n, names[o], b, md, ex, state == DEAD, p, k, h)
        for id, payload, ts, v, n, o, b, md, ex, state, p, k, h in zip(
            ids,
            payloads,
            c.timestamp[slots].tolist(),
            c.version[slots].tolist(),
            c.deliveries[slots].tolist(),
            c.owner[slots].tolist(),
            c.bucket[slots].tolist(),
            c.max_deliveries[slots].tolist(),
            c.expires_at[slots].tolist(),
            c.state[slots].tolist(),
            c.priority[slots].tolist(),
            keys,
            headers,
            strict=True,
        )
    ]


def _ids_of(tl: Timeline, bucket: int) -> list[str]:
    c = tl.cols
    used = c.used
    state = c.state[:used]
    slots = np.flatnonzero(((state == LIVE) | (state == DEAD)) & (c.bucket[:used] == bucket))
    ids, _ = c.records(slots)
    return ids
