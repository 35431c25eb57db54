"""Cron counters: occurrences produced, and occurrences missed by misfire policy."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter

from dejaq.broker.cron.plan import Firing
from dejaq.core.cron import Misfire


class CronMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.occurrences = Counter(
            "dejaq_cron_occurrences",
            "Cron occurrences produced as messages (duplicates of a retried firing included)",
            ["topic"],
            registry=registry,
        )
        self.misfires = Counter(
            "dejaq_cron_misfires",
            "Cron occurrences missed while no broker fired their entry, by misfire policy"
            " (skip: dropped; once, all: the latest one or ones produced late)",
            ["topic", "policy"],
            registry=registry,
        )

    def fired(self, topic: str, policy: str, firing: Firing) -> None:
        if firing.produce:
            self.occurrences.labels(topic).inc(len(firing.produce))
        if firing.missed:
            self.misfires.labels(topic, policy).inc(firing.missed)

    def touch(self, topic: str) -> None:
        """Create a topic's series at zero (a missing series reads as "no data")."""
        self.occurrences.labels(topic)
        for policy in Misfire:
            self.misfires.labels(topic, policy.value)

    def forget(self, topic: str) -> None:
        series: list[tuple[Counter, tuple[str, ...]]] = [(self.occurrences, (topic,))]
        series += [(self.misfires, (topic, p.value)) for p in Misfire]
        for counter, labels in series:
            with contextlib.suppress(KeyError):
                counter.remove(*labels)
