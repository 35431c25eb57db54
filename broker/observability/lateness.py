"""The delivery lateness histogram, observed a pass at a time.

A dispatch pass delivers up to thousands of messages; observing each through
``prometheus_client.Histogram`` costs microseconds a message. This collector
keeps one numpy count array per topic and adds a whole pass with one
``searchsorted`` and one ``bincount``. It exports the same series a Histogram
would: ``_bucket{le}``, ``_sum`` and ``_count``, labelled by topic and kind (the
kind is looked up at scrape time, never per pass).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import numpy.typing as npt
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

NAME = "dejaq_delivery_lateness_seconds"
DOC = (
    "Push time minus due time of each delivery (not held back by a rate cap),"
    " less the part of the wait that fell inside the topic's latest pause"
)
CAPPED_NAME = "dejaq_rate_limited_lateness_seconds"
CAPPED_DOC = "Push time minus due time of deliveries a topic's rate cap held back"
PAUSED_NAME = "dejaq_paused_lateness_seconds"
PAUSED_DOC = (
    "Of each delivery due before its topic's latest resume, the part of its wait"
    " that fell inside the pause (from the later of due time and pause to the resume)"
)
WAIT_NAME = "dejaq_priority_wait_seconds"
WAIT_DOC = "Push time minus the time each delivery of a priority topic became available"
LABELS = ["topic", "kind"]


class _Series:
    __slots__ = ("counts", "sum_s")

    def __init__(self, buckets: int) -> None:
        self.counts = np.zeros(buckets + 1, dtype=np.int64)  # the last one is +Inf
        self.sum_s = 0.0


class LatenessHistogram(Collector):
    """Per-topic lateness histogram in seconds with fixed ``bounds`` (upper, inclusive);
    ``kind_of`` gives a topic's kind label."""

    def __init__(
        self,
        bounds: Sequence[float],
        kind_of: Callable[[str], str],
        name: str = NAME,
        doc: str = DOC,
    ) -> None:
        self._name, self._doc = name, doc
        self._kind_of = kind_of
        self._bounds_s = list(bounds)
        self._bounds_ms = np.asarray(bounds, dtype=np.float64) * 1000
        self._series: dict[str, _Series] = {}

    def labels(self, topic: str) -> None:
        """Create a topic's series at zero."""
        if topic not in self._series:
            self._series[topic] = _Series(len(self._bounds_s))

    def remove(self, topic: str) -> None:
        self._series.pop(topic, None)

    def observe(self, topic: str, lateness_ms: npt.NDArray[np.int64]) -> None:
        """Add one pass: every delivery's lateness in milliseconds (negative counts as 0)."""
        if not len(lateness_ms):
            return
        series = self._series.get(topic)
        if series is None:
            series = self._series[topic] = _Series(len(self._bounds_s))
        late = np.maximum(lateness_ms, 0)
        slots = np.searchsorted(self._bounds_ms, late, side="left")
        series.counts += np.bincount(slots, minlength=len(series.counts))
        series.sum_s += float(late.sum()) / 1000

    def totals(self) -> dict[str, npt.NDArray[np.int64]]:
        """Each topic's bucket counts so far (a copy; the last bucket is +Inf)."""
        return {topic: series.counts.copy() for topic, series in list(self._series.items())}

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._name, self._doc, labels=LABELS)
        for topic, series in list(self._series.items()):
            cumulative = np.cumsum(series.counts).tolist()
            buckets = [(_le(b), c) for b, c in zip(self._bounds_s, cumulative, strict=False)]
            buckets.append(("+Inf", cumulative[-1]))
            family.add_metric([topic, self._kind_of(topic)], buckets, series.sum_s)
        yield family

    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self._name, self._doc, labels=LABELS)


def _le(bound: float) -> str:
    return repr(float(bound))
