"""A topic's live messages a page at a time in (timestamp, id) order
(``Storage.by_due``): one vectorised pass over the topic's columns a page,
the ids read only for the page and the messages tied with its last one."""

from __future__ import annotations

import numpy as np

from dejaq.core.model import Message
from dejaq.storage_plugins.memory.columns import LIVE
from dejaq.storage_plugins.memory.timeline import Timeline


def by_due(tl: Timeline, after: tuple[int, str] | None, limit: int) -> list[Message]:
    cols = tl.cols
    slots = cols.slots_in(LIVE)
    ts = cols.timestamp[slots]
    if after is not None:
        at, after_id = after
        later = ts > at
        tied = np.flatnonzero(ts == at)
        if len(tied):  # the cursor's own time: only the ids after it
            ids, _ = cols.records(slots[tied])
            later[tied[[id > after_id for id in ids]]] = True
        slots, ts = slots[later], ts[later]
    if len(slots) > limit:
        # The page's times, and every message at its last time (ties go by id).
        last = np.partition(ts, limit - 1)[limit - 1]
        keep = ts <= last
        slots, ts = slots[keep], ts[keep]
    ids, _ = cols.records(slots)
    order = sorted(range(len(ids)), key=lambda i: (int(ts[i]), ids[i]))[:limit]
    return [tl.message(int(slots[i])) for i in order]
