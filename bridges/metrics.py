"""A bridge's Prometheus metrics, each labelled with its bridge's name."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Publish lateness after due: fine around the 20 ms target.
LATENESS_BUCKETS = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.015,
    0.02,
    0.03,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class BridgeMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.source_lag = Gauge(
            "dejaq_bridge_source_lag",
            "Messages waiting at the bridge's source that it has not read yet",
            ["bridge"],
            registry=self.registry,
        )
        self.held = Gauge(
            "dejaq_bridge_held",
            "Messages on the bridge's topic not yet published (waiting, due or leased)",
            ["bridge"],
            registry=self.registry,
        )
        self.accepted = Counter(
            "dejaq_bridge_accepted",
            "Source messages dejaq accepted (a duplicate id counts) and the source acknowledged",
            ["bridge"],
            registry=self.registry,
        )
        self.published = Counter(
            "dejaq_bridge_published",
            "Due messages the sink confirmed, then acked in dejaq",
            ["bridge"],
            registry=self.registry,
        )
        self.unreadable = Counter(
            "dejaq_bridge_unreadable",
            "Source messages the rule could not read or dejaq refused, sent to the topic's"
            " dead timeline or the error sink with their reason",
            ["bridge"],
            registry=self.registry,
        )
        self.errors = Counter(
            "dejaq_bridge_errors",
            "Failures the bridge backed off from and tried again (end: source, sink, dejaq)",
            ["bridge", "end"],
            registry=self.registry,
        )
        self.lateness = Histogram(
            "dejaq_bridge_publish_lateness_seconds",
            "From a message's due time to the sink's confirmation of its publish",
            ["bridge"],
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
