"""The issue's targets (2-core machine, 100-byte payloads) and how each is read from results."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Getter = Callable[[dict[str, Any]], float | None]


def dig(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def early_total(r: dict[str, Any]) -> float | None:
    """Early deliveries over every scenario of one backend (or the baseline)."""
    found = [v for k, v in _walk(r) if k == "early" and isinstance(v, int)]
    return float(sum(found)) if found else None


def _walk(data: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "lateness" and isinstance(value, dict) and "early" in value:
                continue  # the summary repeats its scenario's count
            yield key, value
            yield from _walk(value)


@dataclass(frozen=True)
class Target:
    name: str
    limit: float
    higher_is_better: bool
    unit: str
    get: Getter  # from a backend's results
    baseline: Getter | None = None  # the Redis sorted-set figure it compares with
    only: str | None = None  # the backend the target is set for (None: every backend)
    scale: bool = False  # read from the memory-at-scale results, not per backend

    def met(self, value: float | None) -> bool | None:
        if value is None or math.isnan(value):
            return None
        return value >= self.limit if self.higher_is_better else value <= self.limit


def _p99(rate: str) -> Getter:
    return lambda r: dig(r, "lateness", rate, "lateness", "p99_ms")


def _first_stage(field: str, *path: str) -> Getter:
    def get(scale: dict[str, Any]) -> float | None:
        stages = dig(scale, "stages") or {}
        for stage in stages.values():
            value = dig(stage, field, *path)
            if value is not None:
                return float(value)
        return None

    return get


TARGETS: tuple[Target, ...] = (
    Target(
        "produce >= 250k msgs/s (batch 1000)",
        250_000,
        True,
        "msgs/s",
        lambda r: dig(r, "produce", "lean", "1000", "msgs_per_s"),
        lambda b: dig(b, "produce", "1000", "msgs_per_s"),
        only="memory",
    ),
    Target(
        "end-to-end >= 150k msgs/s",
        150_000,
        True,
        "msgs/s",
        lambda r: dig(r, "end_to_end", "lean", "msgs_per_s"),
        lambda b: dig(b, "end_to_end", "msgs_per_s"),
    ),
    Target("0 early deliveries", 0, False, "msgs", early_total, early_total),
    Target("lateness p99 <= 2 ms at 1k due/s", 2, False, "ms", _p99("1000"), _p99("1000")),
    Target("lateness p99 <= 10 ms at 20k due/s", 10, False, "ms", _p99("20000"), _p99("20000")),
    Target(
        "<= 250 B broker memory / message",
        250,
        False,
        "B",
        _first_stage("bytes_per_message"),
        lambda b: dig(b, "produce", "1000", "memory_bytes_per_message"),
        only="memory",
        scale=True,
    ),
    Target(
        "idle CPU <= 0.5% with 1M waiting",
        0.5,
        False,
        "%",
        _first_stage("idle", "cpu_percent"),
        lambda b: dig(b, "idle", "cpu_percent"),
        only="memory",
        scale=True,
    ),
)


def evaluate(results: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (target, backend): measured, met, the baseline figure and the ratio."""
    rows: list[dict[str, Any]] = []
    baseline = results.get("baseline") or {}
    for t in TARGETS:
        base = t.baseline(baseline) if t.baseline and "skipped" not in baseline else None
        if t.scale:
            sources = [("memory", results["scale"])] if "scale" in results else []
        else:
            sources = [
                (name, r)
                for name, r in (results.get("backends") or {}).items()
                if "skipped" not in r and (t.only is None or name == t.only)
            ]
        for name, r in sources:
            value = t.get(r)
            ratio = value / base if value is not None and base else None
            rows.append(
                {
                    "target": t.name,
                    "backend": name,
                    "measured": value,
                    "unit": t.unit,
                    "met": t.met(value),
                    "baseline": base,
                    "ratio_vs_baseline": round(ratio, 3) if ratio is not None else None,
                }
            )
    return rows
