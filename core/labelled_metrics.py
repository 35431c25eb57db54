"""Prometheus metrics of one thing that runs beside the broker's own (a bridge,
an outbox relay): each made in one registry, labelled first by which one.

The bridges and the outbox relay each run inside a broker (in its registry) or
on their own (in a registry of their own, served by their command's
``--metrics``); this is what the two share.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# From a millisecond to a minute, fine between 10 and 50 ms where the targets sit.
FINE_SECONDS_BUCKETS = (
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


class LabelledMetrics:
    """A registry (a new one unless given) and the makers of its metrics, each
    labelled ``label`` first, then by any ``more`` labels a metric names."""

    def __init__(self, label: str, registry: CollectorRegistry | None = None) -> None:
        self.label = label
        self.registry = registry or CollectorRegistry()

    def counter(self, name: str, doc: str, *more: str) -> Counter:
        return Counter(name, doc, [self.label, *more], registry=self.registry)

    def gauge(self, name: str, doc: str) -> Gauge:
        return Gauge(name, doc, [self.label], registry=self.registry)

    def histogram(self, name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
        return Histogram(name, doc, [self.label], buckets=buckets, registry=self.registry)
