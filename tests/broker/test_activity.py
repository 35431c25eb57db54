"""A topic's recent deliveries read from the metrics: how many a second over
the last minute, and the 99th percentile of their lateness."""

from __future__ import annotations

import numpy as np

from dejaq.broker.observability.activity import SAMPLE_S, WINDOW_S, Activity, ActivityMeter
from dejaq.broker.observability.metrics import Metrics
from dejaq.core.model import KIND_PRIORITY, Topic, TopicSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def delivered(metrics: Metrics, topic: str, late_ms: list[int], capped: bool = False) -> None:
    due = np.full(len(late_ms), 10_000, np.int64)
    metrics.delivered(topic, 10_000, due - np.array(late_ms, np.int64), 0, capped)


def test_rate_and_p99_cover_the_deliveries_since_the_start_while_young() -> None:
    # Given a broker 10 s old that delivered 98 messages 1 ms late and 2 three seconds late
    metrics, clock = Metrics(), Clock()
    meter = ActivityMeter(metrics, clock)
    delivered(metrics, "t", [1] * 98 + [3000, 3000])
    clock.now += 10
    # Then 10 a second, and the p99 falls in the bucket of 2.5 to 5 s
    [activity] = meter.of(["t"])
    assert activity.delivery_rate == 10.0 and activity.over_ms == 10_000
    assert 2500 < activity.lateness_p99_ms <= 5000
    # and a topic that delivered nothing has nothing
    assert meter.of(["idle"]) == [Activity(0.0, 0.0, 10_000)]


def test_only_the_last_minute_counts_once_sampled() -> None:
    # Given deliveries a minute ago, seen by a look then
    metrics, clock = Metrics(), Clock()
    meter = ActivityMeter(metrics, clock)
    delivered(metrics, "t", [5000] * 100)
    clock.now += SAMPLE_S
    meter.of(["t"])
    # When the next minute delivers 60 on time, looked at on the way
    for _ in range(int(WINDOW_S // SAMPLE_S)):
        clock.now += SAMPLE_S
        delivered(metrics, "t", [0] * 10, capped=True)  # held back by a cap: counted too
        meter.of(["t"])
    clock.now += 1
    [activity] = meter.of(["t"])
    # Then the slow ones of a minute ago are out of the figures
    assert activity.over_ms == int((WINDOW_S + 1) * 1000)
    assert activity.delivery_rate == round(10 * WINDOW_S // SAMPLE_S / (WINDOW_S + 1), 3)
    assert activity.lateness_p99_ms <= 0.5


def test_a_priority_topic_reports_the_wait_of_its_deliveries() -> None:
    metrics, clock = Metrics(), Clock()
    metrics.topic_known(Topic("p", TopicSettings(kind=KIND_PRIORITY, priorities=3), 1))
    meter = ActivityMeter(metrics, clock)
    metrics.delivered_by_priority("p", np.full(10, 40, np.int64), 0)
    clock.now += 2
    [activity] = meter.of(["p"])
    assert activity.delivery_rate == 5.0 and 25 < activity.lateness_p99_ms <= 50
