"""The relay's Prometheus metrics, each labelled with its outbox."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Lag from a row's write to its hand-over: fine below 50 ms, where the target sits.
LAG_BUCKETS = (
    0.001,
    0.002,
    0.003,
    0.005,
    0.0075,
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


class RelayMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.lag = Histogram(
            "dejaq_outbox_relay_lag_seconds",
            "Time from an outbox row's commit (its write when the database keeps no"
            " commit times: track_commit_timestamp) to dejaq accepting it",
            ["outbox"],
            buckets=LAG_BUCKETS,
            registry=self.registry,
        )
        self.relayed = Counter(
            "dejaq_outbox_rows_relayed",
            "Outbox rows handed to dejaq and deleted",
            ["outbox"],
            registry=self.registry,
        )
        self.parked = Gauge(
            "dejaq_outbox_parked_rows",
            "Outbox rows dejaq can never accept, kept with their reason",
            ["outbox"],
            registry=self.registry,
        )
