"""The gauges of each topic's busiest keys: ``dejaq_key_due``, ``dejaq_key_held``
and ``dejaq_key_lateness_seconds``, labelled ``{topic, key}``.

A key is a label, and keys are unbounded (a tenant, a user): only the
``TOP_KEYS`` busiest keys of each topic (``Storage.keys``: most messages due
now) have series, and a key that leaves the top has its series dropped. So a
topic never has more than ``TOP_KEYS`` series of each.
"""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import CollectorRegistry, Gauge

from dejaq.broker.observability.series import drop_series
from dejaq.storage_plugins.base import KeyLoad

TOP_KEYS = 10
KEY_LABELS = ("topic", "key")


class KeyGauges:
    """The top keys' series, and which keys of which topic have them."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.due = Gauge(
            "dejaq_key_due",
            f"Messages of the key due now, for each topic's {TOP_KEYS} busiest keys",
            KEY_LABELS,
            registry=registry,
        )
        self.held = Gauge(
            "dejaq_key_held",
            f"Messages of the key under a live lease, for each topic's {TOP_KEYS} busiest keys",
            KEY_LABELS,
            registry=registry,
        )
        self.lateness = Gauge(
            "dejaq_key_lateness_seconds",
            "How long the key's oldest due message has waited, for each topic's"
            f" {TOP_KEYS} busiest keys",
            KEY_LABELS,
            registry=registry,
        )
        self._shown: dict[str, set[str]] = {}  # topic -> keys with series

    def report(self, topic: str, loads: Sequence[KeyLoad], now: int) -> None:
        """``topic``'s busiest keys now; the series of keys no longer among them go."""
        top = list(loads)[:TOP_KEYS]
        keys = {k.key for k in top}
        for gone in self._shown.get(topic, set()) - keys:
            self._drop(topic, gone)
        for k in top:
            self.due.labels(topic, k.key).set(k.due)
            self.held.labels(topic, k.key).set(k.held)
            late = max(0, now - k.oldest) / 1000 if k.due else 0.0
            self.lateness.labels(topic, k.key).set(late)
        if keys:
            self._shown[topic] = keys
        else:
            self._shown.pop(topic, None)

    def topics(self) -> set[str]:
        """The topics with key series here."""
        return set(self._shown)

    def forget(self, topic: str) -> None:
        """Drop every key series of ``topic``."""
        for key in self._shown.pop(topic, set()):
            self._drop(topic, key)

    def _drop(self, topic: str, key: str) -> None:
        for metric in (self.due, self.held, self.lateness):
            drop_series(metric, topic, key)
