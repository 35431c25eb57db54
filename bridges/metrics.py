"""A bridge's Prometheus metrics, each labelled with its bridge's name."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

from dejaq.core.labelled_metrics import FINE_SECONDS_BUCKETS, LabelledMetrics


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
        # Publish lateness after due: fine around the 20 ms target.
        self.lateness = self.histogram(
            "dejaq_bridge_publish_lateness_seconds",
            "From a message's due time to the sink's confirmation of its publish",
            FINE_SECONDS_BUCKETS,
        )


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
