"""The metrics of a bridge or an outbox relay: each labelled first by which
one, all in one registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from dejaq.core.labelled_metrics import FINE_SECONDS_BUCKETS, LabelledMetrics


def test_each_metric_is_labelled_first_by_which_one_then_by_its_own_labels() -> None:
    # Given metrics labelled by bridge: a counter by end too, a gauge, a histogram
    metrics = LabelledMetrics("bridge")
    errors = metrics.counter("t_errors", "errors", "end")
    held = metrics.gauge("t_held", "held")
    late = metrics.histogram("t_late_seconds", "lateness", FINE_SECONDS_BUCKETS)
    # When each counts for bridge b
    errors.labels("b", "sink").inc()
    held.labels("b").set(3)
    late.labels("b").observe(0.012)
    # Then its registry holds them under those labels, in the buckets given
    value = metrics.registry.get_sample_value
    assert value("t_errors_total", {"bridge": "b", "end": "sink"}) == 1
    assert value("t_held", {"bridge": "b"}) == 3
    assert value("t_late_seconds_bucket", {"bridge": "b", "le": "0.01"}) == 0
    assert value("t_late_seconds_bucket", {"bridge": "b", "le": "0.015"}) == 1


def test_metrics_given_a_registry_fill_that_one() -> None:
    # Given a registry of its own (a broker's)
    registry = CollectorRegistry()
    # When metrics labelled by outbox are made in it and count
    LabelledMetrics("outbox", registry).counter("t_relayed", "relayed").labels("o").inc()
    # Then that registry holds the count
    assert registry.get_sample_value("t_relayed_total", {"outbox": "o"}) == 1
