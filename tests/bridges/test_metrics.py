"""The publish lateness histogram, observed a batch at a time, reads on
/metrics as prometheus_client's own histogram of the same values would."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from dejaq.bridges.metrics import LATENESS_BUCKETS, BridgeMetrics

NAME = "dejaq_bridge_publish_lateness_seconds"


def _lines(registry: CollectorRegistry) -> list[str]:
    return [
        line
        for line in generate_latest(registry).decode().splitlines()
        if line.startswith(NAME) and "_created" not in line
    ]


def test_batches_of_lateness_read_as_the_same_values_observed_one_by_one() -> None:
    # Given a bridge's metrics and prometheus_client's histogram of the same buckets
    metrics = BridgeMetrics()
    reference = CollectorRegistry()
    one_by_one = Histogram(
        NAME, "reference", ["bridge"], buckets=LATENESS_BUCKETS, registry=reference
    )
    batches = {
        "a": [[0.0, 0.001, 0.0015, 0.02], [0.5, 99.0]],
        "b": [[0.003], [], [60.0, 0.25]],
    }
    # When the same values are observed, a batch at a time and one by one
    for bridge, parts in batches.items():
        for part in parts:
            metrics.lateness.observe_many(bridge, part)
            for value in part:
                one_by_one.labels(bridge).observe(value)
    # Then /metrics shows the same buckets, counts and sums
    assert _lines(metrics.registry) == _lines(reference)
    assert any('le="0.001"} 2.0' in line for line in _lines(metrics.registry))
