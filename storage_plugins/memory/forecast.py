"""The forecast of a memory topic: waiting messages counted in due-time bins.

Read from each bucket's time index (``TimeIndex.between``): only the entries
due in the range are looked at, a few numpy operations over them, so a
forecast of the next hour costs what that hour holds, not what the topic
holds. An entry counts when it is current (its slot's message is live, due at
that time, in that bucket) and its message has no lease owner; a slot with
two current entries counts once.
"""

from __future__ import annotations

import numpy as np

from dejaq.storage_plugins.base import Forecast
from dejaq.storage_plugins.memory.columns import LIVE, Columns
from dejaq.storage_plugins.memory.time_index import TimeIndex
from dejaq.storage_plugins.memory.types import I64


def forecast(lanes: list[TimeIndex], cols: Columns, request: Forecast) -> list[int]:
    """``request.bins`` counts of waiting messages of ``lanes`` (see base.Forecast)."""
    times: list[I64] = []
    slots: list[I64] = []
    buckets: list[I64] = []
    for lane in lanes:
        ts, at = lane.between(request.now, request.end)
        if len(at):
            times.append(ts)
            slots.append(at)
            buckets.append(np.full(len(at), lane.bucket, np.int64))
    if not slots:
        return [0] * request.bins
    ts, at, bucket = np.concatenate(times), np.concatenate(slots), np.concatenate(buckets)
    ok = (
        (cols.state[at] == LIVE)
        & (cols.timestamp[at] == ts)
        & (cols.bucket[at] == bucket)
        & (cols.owner[at] == 0)
    )
    ts, at = ts[ok], at[ok]
    # Count a slot once: each slot keeps the position of its last entry (the
    # array is left uninitialised: only positions written here are read).
    last = np.empty(cols.used, np.int64)
    positions = np.arange(len(at), dtype=np.int64)
    last[at] = positions
    ts = ts[last[at] == positions]
    counts = np.bincount((ts - request.now) // request.step_ms, minlength=request.bins)
    return [int(n) for n in counts[: request.bins]]
