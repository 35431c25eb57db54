"""Every per-topic series carries the topic's kind, learnt once per topic."""

from __future__ import annotations

import numpy as np
import pytest

from dejaq.broker.cron.metrics import CronMetrics
from dejaq.broker.cron.plan import Firing
from dejaq.broker.observability.gauges import refresh
from dejaq.broker.observability.metrics import Event, Metrics
from dejaq.broker.webhooks.metrics import WebhookMetrics
from dejaq.core.model import KIND_PRIORITY, KIND_TIMELINE, Topic, TopicSettings

from .inprocess import ManualClock, make_broker, produce_at

pytestmark = pytest.mark.timeout(30)
PRIORITY = TopicSettings(kind=KIND_PRIORITY, priorities=10)


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_counters_gauges_and_histograms_carry_the_kind() -> None:
    # Given a priority topic and a timeline the metrics were told about
    m = Metrics()
    m.topic_known(Topic("jobs", PRIORITY))
    m.topic_known(Topic("reminders"))
    # When events, a dispatch pass and gauges are recorded
    m.count(Event.PRODUCED, "jobs", 3)
    m.count(Event.PRODUCED, "reminders")
    m.delivered("jobs", 1_000, np.array([999, 990], dtype=np.int64), 1)
    m.topic_gauges("jobs").lag.set(2.5)
    m.topic_gauges("jobs").messages[0].set(7)
    m.delivered_by_priority("jobs", np.array([0, 3, 12], dtype=np.int64), 0)
    # Then each series is labelled with its topic's kind
    assert value(m, "dejaq_produced_total", topic="jobs", kind="priority") == 3
    assert value(m, "dejaq_produced_total", topic="reminders", kind="timeline") == 1
    assert value(m, "dejaq_delivered_total", topic="jobs", kind="priority") == 5
    assert value(m, "dejaq_redelivered_total", topic="jobs", kind="priority") == 1
    count = "dejaq_delivery_lateness_seconds_count"
    assert value(m, count, topic="jobs", kind="priority") == 2
    waited = "dejaq_priority_wait_seconds_count"
    assert value(m, waited, topic="jobs", kind="priority") == 3
    # (a priority topic's series start with its wait histogram, a timeline's with lateness)
    assert value(m, waited, topic="reminders", kind="timeline") is None
    assert value(m, count, topic="reminders", kind="timeline") is None
    m.touch_topic("reminders")
    assert value(m, count, topic="reminders", kind="timeline") == 0
    assert value(m, "dejaq_lag_seconds", topic="jobs", kind="priority") == 2.5
    assert value(m, "dejaq_messages", topic="jobs", kind="priority", state="waiting") == 7
    # and none under the other kind.
    assert value(m, "dejaq_produced_total", topic="jobs", kind="timeline") is None


def test_a_topic_never_described_counts_as_a_timeline() -> None:
    m = Metrics()
    m.count(Event.ACKED, "cron-companion")
    assert value(m, "dejaq_acked_total", topic="cron-companion", kind="timeline") == 1
    assert m.kind_of("cron-companion") == KIND_TIMELINE


def test_a_topic_created_again_with_another_kind_starts_new_series() -> None:
    # Given a timeline that has counted messages
    m = Metrics()
    m.topic_known(Topic("jobs"))
    m.count(Event.PRODUCED, "jobs", 5)
    m.topic_gauges("jobs").lag.set(1)
    # When it is created again as a priority topic
    m.topic_known(Topic("jobs", PRIORITY))
    m.count(Event.PRODUCED, "jobs", 2)
    # Then the timeline series are gone and the priority ones count afresh
    assert value(m, "dejaq_produced_total", topic="jobs", kind="timeline") is None
    assert value(m, "dejaq_lag_seconds", topic="jobs", kind="timeline") is None
    assert value(m, "dejaq_produced_total", topic="jobs", kind="priority") == 2
    # and telling the same kind again changes nothing.
    m.topic_known(Topic("jobs", PRIORITY))
    assert value(m, "dejaq_produced_total", topic="jobs", kind="priority") == 2


def test_forgetting_a_topic_drops_its_series() -> None:
    m = Metrics()
    m.topic_known(Topic("jobs", PRIORITY))
    m.count(Event.PRODUCED, "jobs")
    m.topic_gauges("jobs")
    m.forget_topic("jobs")
    text = "\n".join(
        f"{s.name}{s.labels}" for metric in m.registry.collect() for s in metric.samples
    )
    assert "'jobs'" not in text
    assert not m.knows("jobs")


def test_webhook_series_carry_the_kind_and_go_with_their_topic() -> None:
    # Given a priority topic whose webhook was answered once and failed once
    m = Metrics()
    m.topic_known(Topic("jobs", PRIORITY))
    hooks = WebhookMetrics(m.registry, m.kind_of)
    hooks.observe("jobs", 204, 0.01)
    hooks.observe("jobs", None, 0.5)
    labels = {"topic": "jobs", "kind": "priority"}
    requests = "dejaq_webhook_requests_total"
    assert m.registry.get_sample_value(requests, {**labels, "outcome": "2xx"}) == 1
    assert m.registry.get_sample_value(requests, {**labels, "outcome": "error"}) == 1
    assert value(m, "dejaq_webhook_request_seconds_count", **labels) == 2
    # When its poster goes
    hooks.forget("jobs")
    # Then its webhook series are gone
    assert m.registry.get_sample_value(requests, {**labels, "outcome": "2xx"}) is None
    assert m.registry.get_sample_value(requests, {**labels, "outcome": "error"}) is None
    assert value(m, "dejaq_webhook_request_seconds_count", **labels) is None


def test_cron_series_carry_the_target_kind() -> None:
    # Given a priority target whose series were touched before its kind was known
    m = Metrics()
    cron = CronMetrics(m.registry, m.kind_of)
    cron.touch("jobs")
    assert value(m, "dejaq_cron_occurrences_total", topic="jobs", kind="timeline") == 0
    # When the broker learns the kind and an entry fires
    m.topic_known(Topic("jobs", PRIORITY))
    cron.fired("jobs", "skip", Firing(produce=[1, 2], missed=3, next_ms=5))
    # Then the series moved to the priority kind
    assert value(m, "dejaq_cron_occurrences_total", topic="jobs", kind="priority") == 2
    labels = {"topic": "jobs", "kind": "priority", "policy": "skip"}
    assert m.registry.get_sample_value("dejaq_cron_misfires_total", labels) == 3
    assert value(m, "dejaq_cron_occurrences_total", topic="jobs", kind="timeline") is None
    # and forgetting the target drops them.
    cron.forget("jobs")
    assert value(m, "dejaq_cron_occurrences_total", topic="jobs", kind="priority") is None


async def test_the_broker_labels_what_it_reads_and_refreshes() -> None:
    # Given a broker over memory with a priority topic and a timeline in storage
    broker = await make_broker(ManualClock())
    try:
        clock_now = broker.clock.now_ms()
        await broker.storage.create_topic(Topic("jobs", PRIORITY, clock_now))
        await broker.storage.create_topic(Topic("later", created_at_ms=clock_now))
        # When a message is produced on the timeline (the broker reads it)
        await produce_at(broker, "later", [clock_now + 60_000])
        # and the gauges are refreshed (the priority topic was never read)
        await refresh(broker)
        m = broker.metrics
        # Then both topics' series carry their kinds
        assert value(m, "dejaq_produced_total", topic="later", kind="timeline") == 1
        labels = {"topic": "later", "kind": "timeline", "state": "waiting"}
        assert m.registry.get_sample_value("dejaq_messages", labels) == 1
        labels = {"topic": "jobs", "kind": "priority", "state": "waiting"}
        assert m.registry.get_sample_value("dejaq_messages", labels) == 0
        assert value(m, "dejaq_consumers", topic="jobs", kind="priority") == 0
    finally:
        await broker.storage.close()
