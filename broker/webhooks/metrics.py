"""Webhook counters: requests by outcome, and how long they took.

Labelled by topic and its kind, like every per-topic series; a topic's
series go with its poster."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram

from dejaq.broker.observability.series import drop_series

OUTCOMES = ("2xx", "429", "4xx", "5xx", "other", "error")  # error: no answer (timeout, connection)
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def outcome(status: int | None) -> str:
    if status is None:
        return "error"
    if status == 429:
        return "429"
    return {2: "2xx", 4: "4xx", 5: "5xx"}.get(status // 100, "other")


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry, kind_of: Callable[[str], str]) -> None:
        self._kind_of = kind_of
        self._kinds: dict[str, str] = {}  # the kind each topic's series carry
        self._counted: dict[tuple[str, int | None], Counter] = {}  # by topic, status
        self._timed: dict[str, Histogram] = {}
        self.requests = Counter(
            "dejaq_webhook_requests",
            "Webhook requests by outcome: the answer's status class, or error (no answer:"
            " a timeout, a refused or broken connection, a target the allowlist refuses)",
            ["topic", "kind", "outcome"],
            registry=registry,
        )
        self.seconds = Histogram(
            "dejaq_webhook_request_seconds",
            "Time from sending a webhook request to its answer (or its failure)",
            ["topic", "kind"],
            buckets=_BUCKETS,
            registry=registry,
        )

    def observe(self, topic: str, status: int | None, seconds: float) -> None:
        # The labelled series are looked up once: labels() costs more than the
        # count itself, once per request.
        counted = self._counted.get((topic, status))
        if counted is None:
            counted = self._counted[topic, status] = self.requests.labels(
                topic, self._kind(topic), outcome(status)
            )
        timed = self._timed.get(topic)
        if timed is None:
            timed = self._timed[topic] = self.seconds.labels(topic, self._kind(topic))
        counted.inc()
        timed.observe(seconds)

    def _kind(self, topic: str) -> str:
        kind = self._kinds.get(topic)
        if kind is None:
            kind = self._kinds[topic] = self._kind_of(topic)
        return kind

    def forget(self, topic: str) -> None:
        self._timed.pop(topic, None)
        for key in [k for k in self._counted if k[0] == topic]:
            del self._counted[key]
        kind = self._kinds.pop(topic, None)
        if kind is not None:
            drop_series(self.requests, topic, kind, each=OUTCOMES)
            drop_series(self.seconds, topic, kind)
