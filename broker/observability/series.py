"""Dropping a topic's labelled series (the topic deleted, or its kind changed),
so label sets do not pile up."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from prometheus_client.metrics import MetricWrapperBase


def drop_series(metric: MetricWrapperBase, *labels: str, each: Iterable[str] | None = None) -> None:
    """Remove ``metric``'s child labelled ``labels``; given ``each``, the children
    labelled ``labels`` and then each of its values. A child never created is no error."""
    rows = [labels] if each is None else [(*labels, value) for value in each]
    for row in rows:
        with contextlib.suppress(KeyError):  # never observed: nothing to drop
            metric.remove(*row)
