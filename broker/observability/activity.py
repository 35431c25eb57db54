"""A topic's recent deliveries, read from this broker's metrics: how many a
second, and the 99th percentile of their lateness.

The metrics hold totals since the broker started (the lateness histograms'
bucket counts). This keeps samples of them, taken when activity is asked, at
most one a ``SAMPLE_S``, and answers from the newest one at least ``WINDOW_S``
old (the start, with nothing counted, while the broker is younger): the
figures cover the last minute (up to 70 s while someone keeps asking), or
longer when nobody asked for a while, and say how long. The percentile is
read from the histogram's buckets as Prometheus' ``histogram_quantile`` reads
them (linear within a bucket).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from dejaq.broker.observability.metrics import LATENESS_BUCKETS, Metrics
from dejaq.core.model import KIND_PRIORITY

WINDOW_S = 60.0
# Samples kept: at most WINDOW_S / SAMPLE_S + 1, each a few hundred bytes a topic.
SAMPLE_S = 10.0
QUANTILE = 0.99
Counts = npt.NDArray[np.int64]


class Activity(NamedTuple):
    """A topic's deliveries a second and lateness p99 (ms) over ``over_ms``."""

    delivery_rate: float
    lateness_p99_ms: float
    over_ms: int


class _Sample(NamedTuple):
    at: float  # monotonic seconds
    counts: dict[str, Counts]  # topic -> lateness bucket counts (the last is +Inf)


class ActivityMeter:
    """Recent activity of every topic from ``metrics``; ``clock`` in seconds."""

    def __init__(self, metrics: Metrics, clock: Callable[[], float] = time.monotonic) -> None:
        self._metrics = metrics
        self._clock = clock
        self._samples: deque[_Sample] = deque([_Sample(clock(), {})])
        self._bounds_ms = np.asarray(LATENESS_BUCKETS, np.float64) * 1000

    def of(self, topics: list[str]) -> list[Activity]:
        """The activity of each of ``topics``, in order."""
        now = self._sample()
        base = self._base(now.at)
        over = now.at - base.at
        return [self._activity(now.counts.get(t), base.counts.get(t), over) for t in topics]

    def _sample(self) -> _Sample:
        at = self._clock()
        sample = _Sample(at, self._totals())
        if at - self._samples[-1].at >= SAMPLE_S:
            self._samples.append(sample)
        return sample

    def _base(self, at: float) -> _Sample:
        """The newest sample at least WINDOW_S old (else the oldest); older ones go."""
        while len(self._samples) > 1 and self._samples[1].at <= at - WINDOW_S:
            self._samples.popleft()
        return self._samples[0]

    def _totals(self) -> dict[str, Counts]:
        """Each topic's lateness bucket counts since the start: a timeline's on
        time and rate-capped deliveries, a priority topic's waits."""
        m = self._metrics
        out: dict[str, Counts] = {}
        for histogram in (m.lateness, m.capped_lateness, m.priority_wait):
            for topic, counts in histogram.totals().items():
                if (histogram is m.priority_wait) != (m.kind_of(topic) == KIND_PRIORITY):
                    continue
                out[topic] = out[topic] + counts if topic in out else counts
        return out

    def _activity(self, now: Counts | None, base: Counts | None, over_s: float) -> Activity:
        over_ms = int(over_s * 1000)
        if now is None:
            return Activity(0.0, 0.0, over_ms)
        # A topic's series start again at zero when it is deleted: never below.
        recent = now if base is None or (now < base).any() else now - base
        delivered = int(recent.sum())
        rate = delivered / over_s if over_s > 0 else 0.0
        return Activity(round(rate, 3), round(self._quantile(recent), 3), over_ms)

    def _quantile(self, counts: Counts) -> float:
        total = int(counts.sum())
        if total == 0:
            return 0.0
        rank = QUANTILE * total
        cumulative = np.cumsum(counts)
        slot = int(np.searchsorted(cumulative, rank, side="left"))
        bounds = self._bounds_ms
        if slot >= len(bounds):  # in +Inf: the highest finite bound, as Prometheus says
            return float(bounds[-1])
        low = 0.0 if slot == 0 else float(bounds[slot - 1])
        before = 0 if slot == 0 else int(cumulative[slot - 1])
        inside = int(counts[slot])
        return low + (float(bounds[slot]) - low) * (rank - before) / inside
