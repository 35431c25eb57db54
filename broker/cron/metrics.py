"""Cron counters: occurrences produced, and occurrences missed by misfire policy.

Labelled by the target topic and its kind, like every per-topic series; each
topic's children are resolved once and kept until its kind changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, Counter

from dejaq.broker.cron.plan import Firing
from dejaq.broker.observability.series import drop_series
from dejaq.core.cron import Misfire


class _Children(NamedTuple):
    kind: str
    occurrences: Any
    misfires: dict[str, Any]  # by policy


class CronMetrics:
    def __init__(self, registry: CollectorRegistry, kind_of: Callable[[str], str]) -> None:
        self._kind_of = kind_of
        self._children: dict[str, _Children] = {}
        self.occurrences = Counter(
            "dejaq_cron_occurrences",
            "Cron occurrences produced as messages (duplicates of a retried firing included)",
            ["topic", "kind"],
            registry=registry,
        )
        self.misfires = Counter(
            "dejaq_cron_misfires",
            "Cron occurrences missed while no broker fired their entry, by misfire policy"
            " (skip: dropped; once, all: the latest one or ones produced late)",
            ["topic", "kind", "policy"],
            registry=registry,
        )

    def _of(self, topic: str) -> _Children:
        kind = self._kind_of(topic)
        children = self._children.get(topic)
        if children is None or children.kind != kind:
            if children is not None:
                self.forget(topic)
            children = self._children[topic] = _Children(
                kind,
                self.occurrences.labels(topic, kind),
                {p.value: self.misfires.labels(topic, kind, p.value) for p in Misfire},
            )
        return children

    def fired(self, topic: str, policy: str, firing: Firing) -> None:
        if firing.produce or firing.missed:
            children = self._of(topic)
            if firing.produce:
                children.occurrences.inc(len(firing.produce))
            if firing.missed:
                children.misfires[policy].inc(firing.missed)

    def touch(self, topic: str) -> None:
        """Create a topic's series at zero (a missing series reads as "no data")."""
        self._of(topic)

    def forget(self, topic: str) -> None:
        children = self._children.pop(topic, None)
        if children is None:
            return
        drop_series(self.occurrences, topic, children.kind)
        drop_series(self.misfires, topic, children.kind, each=[p.value for p in Misfire])
