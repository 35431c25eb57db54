"""The relay's Prometheus metrics, each labelled with its outbox."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from dejaq.core.labelled_metrics import FINE_SECONDS_BUCKETS, LabelledMetrics

# Lag from a row's write to its hand-over: fine below 50 ms, where the target
# sits, with two steps more below 10 ms.
LAG_BUCKETS = tuple(sorted((*FINE_SECONDS_BUCKETS, 0.003, 0.0075)))


class RelayMetrics(LabelledMetrics):
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__("outbox", registry)
        self.lag = self.histogram(
            "dejaq_outbox_relay_lag_seconds",
            "Time from an outbox row's commit (its write when the database keeps no"
            " commit times: track_commit_timestamp) to dejaq accepting it",
            LAG_BUCKETS,
        )
        self.relayed = self.counter(
            "dejaq_outbox_rows_relayed",
            "Outbox rows handed to dejaq and deleted",
        )
        self.parked = self.gauge(
            "dejaq_outbox_parked_rows",
            "Outbox rows dejaq can never accept, kept with their reason",
        )
