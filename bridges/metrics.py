"""A bridge's Prometheus metrics, each labelled with its bridge's name."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from dejaq.core.labelled_metrics import FINE_SECONDS_BUCKETS, LabelledMetrics

# Publish lateness after due: fine around the 20 ms target.
LATENESS_BUCKETS = FINE_SECONDS_BUCKETS


class BridgeMetrics(LabelledMetrics):
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__("bridge", registry)
        self.source_lag = self.gauge(
            "dejaq_bridge_source_lag",
            "Messages waiting at the bridge's source that it has not read yet",
        )
        self.held = self.gauge(
            "dejaq_bridge_held",
            "Messages on the bridge's topic not yet published (waiting, due or leased)",
        )
        self.accepted = self.counter(
            "dejaq_bridge_accepted",
            "Source messages dejaq accepted (a duplicate id counts) and the source acknowledged",
        )
        self.published = self.counter(
            "dejaq_bridge_published",
            "Due messages the sink confirmed, then acked in dejaq",
        )
        self.unreadable = self.counter(
            "dejaq_bridge_unreadable",
            "Source messages the rule could not read or dejaq refused, sent to the topic's"
            " dead timeline or the error sink with their reason",
        )
        self.errors = self.counter(
            "dejaq_bridge_errors",
            "Failures the bridge backed off from and tried again (end: source, sink, dejaq)",
            "end",
        )
        self.lateness = BatchHistogram(
            "dejaq_bridge_publish_lateness_seconds",
            "From a message's due time to the sink's confirmation of its publish",
            self.label,
            LATENESS_BUCKETS,
            self.registry,
        )


class BatchHistogram(Collector):
    """A histogram with one label, observed a batch at a time: a batch's values
    cost a bisect each, where prometheus_client's ``Histogram.observe`` takes
    locks and walks the buckets for every one (a bridge observes every
    message it publishes)."""

    def __init__(
        self,
        name: str,
        documentation: str,
        label: str,
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.label = label
        self.bounds = tuple(buckets)
        self._counts: dict[str, list[int]] = {}  # per bucket, the last one +Inf
        self._sums: dict[str, float] = {}
        self._lock = threading.Lock()  # the /metrics server reads from its own thread
        registry.register(self)

    def observe_many(self, value: str, amounts: Iterable[float]) -> None:
        """Observe each of ``amounts`` under label ``value``."""
        bounds = self.bounds
        found = [0] * (len(bounds) + 1)
        total = 0.0
        for amount in amounts:
            found[bisect_left(bounds, amount)] += 1
            total += amount
        with self._lock:
            counts = self._counts.setdefault(value, [0] * (len(bounds) + 1))
            for i, n in enumerate(found):
                counts[i] += n
            self._sums[value] = self._sums.get(value, 0.0) + total

    def describe(self) -> Iterable[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=[self.label])]

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=[self.label])
        with self._lock:
            taken = [(v, list(c), self._sums[v]) for v, c in self._counts.items()]
        edges = [*map(floatToGoString, self.bounds), "+Inf"]
        for value, counts, total in taken:
            cumulative, buckets = 0, []
            for edge, n in zip(edges, counts, strict=True):
                cumulative += n
                buckets.append((edge, float(cumulative)))
            family.add_metric([value], buckets, total)
        yield family


# What ``dejaq bridge status`` and the console show of a bridge, each by the
# metric sample it is read from.
FIGURES = {
    "dejaq_bridge_source_lag": "lag",
    "dejaq_bridge_held": "held",
    "dejaq_bridge_accepted_total": "accepted",
    "dejaq_bridge_published_total": "published",
    "dejaq_bridge_unreadable_total": "unreadable",
    "dejaq_bridge_errors_total": "errors",
}


def figures(families: Iterable[Metric]) -> dict[str, dict[str, int]]:
    """Each bridge's figures (``FIGURES``) from metric families, read from a
    registry or parsed from a /metrics page; errors summed over the ends."""
    found: dict[str, dict[str, int]] = {}
    for family in families:
        for sample in family.samples:
            figure = FIGURES.get(sample.name)
            name = sample.labels.get("bridge")
            if figure is not None and name is not None:
                row = found.setdefault(name, dict.fromkeys(FIGURES.values(), 0))
                row[figure] += int(sample.value)
    return found
