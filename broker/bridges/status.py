"""What the console shows of each bridge the broker runs: its ends, and its
figures as its metrics have them."""

from __future__ import annotations

from typing import Any

from dejaq.bridges import config
from dejaq.bridges.metrics import FIGURES, figures
from dejaq.broker.context import BrokerContext
from dejaq.core.errors import DejaqError
from dejaq.core.redact import redact


def bridges(broker: BrokerContext) -> list[dict[str, Any]]:
    """Each bridge of ``--bridges``: name, source, topic, sink and its figures."""
    if not broker.config.bridges:
        return []
    try:
        specs = config.load(broker.config.bridges)
    except DejaqError as exc:  # the file changed since the broker started
        return [{"name": broker.config.bridges, "error": redact(str(exc))}]
    found = figures(broker.metrics.registry.collect())
    return [
        {
            "name": spec.name,
            "source": redact(spec.source.url),
            "topic": spec.topic,
            "sink": redact(spec.sink.url) if spec.sink else None,
            **found.get(spec.name, dict.fromkeys(FIGURES.values(), 0)),
        }
        for spec in specs
    ]
