"""The targets (2-core machine, 100-byte payloads) and how each is read from results.

Every target reads a figure that came through the public API (the driver or
the CLI); the wire-limit scenario has none.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

Getter = Callable[[dict[str, Any]], float | None]


def dig(data: Any, *path: str | int) -> Any:
    for key in path:
        if isinstance(key, int):
            if not isinstance(data, list) or not -len(data) <= key < len(data):
                return None
        elif not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _walk(data: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "lateness" and isinstance(value, dict):
                continue  # the summary repeats its scenario's early count
            yield key, value
            yield from _walk(value)
    elif isinstance(data, list):
        for item in data:
            yield from _walk(item)


def early_total(r: dict[str, Any]) -> float | None:
    """Early deliveries over every scenario of one backend (or the rival)."""
    found = [v for k, v in _walk(r) if k == "early" and isinstance(v, int)]
    return float(sum(found)) if found else None


@dataclass(frozen=True)
class Target:
    name: str
    limit: float | None  # None: met when the figure is at least the rival's
    higher_is_better: bool
    unit: str
    scenario: str  # the scenario it reads (no row when that did not run)
    get: Getter  # from a backend's results
    rival: Getter | None = None  # the Redis poller's figure it compares with
    only: str | None = None  # the backend the target is set for (None: every backend)
    scale: bool = False  # read from the memory-at-scale results, not per backend

    def met(self, value: float | None, rival: float | None) -> bool | None:
        if value is None or math.isnan(value):
            return None
        limit = self.limit if self.limit is not None else rival
        if limit is None or (self.limit is None and not limit):
            return None  # no rival figure to compare with (it held no step)
        return value >= limit if self.higher_is_better else value <= limit


def _first_stage(*path: str) -> Getter:
    def get(scale: dict[str, Any]) -> float | None:
        for stage in (dig(scale, "stages") or {}).values():
            value = dig(stage, *path)
            if value is not None:
                return float(value)
        return None

    return get


def _abs(value: float | None) -> float | None:
    return None if value is None else abs(float(value))


def _best(r: dict[str, Any]) -> float | None:
    steady = r.get("steady")
    if not isinstance(steady, dict) or "steps" not in steady:
        return None
    return float(steady.get("best_rate") or 0)


def _per_steady(r: dict[str, Any], rate: float | None) -> float | None:
    """``rate`` against the steady rate held in the same run (steady ran too)."""
    best = _best(r)
    return None if rate is None or not best else round(rate / best, 2)


# The targets per backend: the steady rate held at p99 <= 10 ms, and the
# p99 lateness at 1k due/s through `dejaq consume`.
STEADY_RATES = {"memory": 40_000, "redis": 25_000, "sqlite": 15_000, "postgres": 10_000}
CLI_P99_MS = {"memory": 3, "redis": 5, "sqlite": 5, "postgres": 10}

TARGETS: tuple[Target, ...] = (
    Target(
        "steady: highest rate at p99 <= 10 ms >= the Redis poller's",
        None,
        True,
        "msgs/s",
        "steady",
        _best,
        _best,
        only="memory",
    ),
    *(
        Target(
            f"steady: highest rate at p99 <= 10 ms >= {rate // 1000}k msgs/s",
            rate,
            True,
            "msgs/s",
            "steady",
            _best,
            _best,
            only=backend,
        )
        for backend, rate in STEADY_RATES.items()
    ),
    Target("0 early deliveries", 0, False, "msgs", "", early_total, early_total),
    *(
        Target(
            f"lateness p99 <= {limit} ms at 1k due/s (3 x dejaq consume)",
            limit,
            False,
            "ms",
            "cli",
            lambda r: dig(r, "cli", "at_rate", "steps", 0, "lateness", "p99_ms"),
            only=backend,
        )
        for backend, limit in CLI_P99_MS.items()
    ),
    Target(
        "one dejaq consume keeps up with >= 20k msgs/s",
        20_000,
        True,
        "msgs/s",
        "cli",
        lambda r: dig(r, "cli", "one_process", "best_rate"),
    ),
    Target(
        "bulk produce -> deliver -> ack >= 150k msgs/s",
        150_000,
        True,
        "msgs/s",
        "bulk",
        lambda r: dig(r, "bulk", "msgs_per_s"),
        only="memory",
    ),
    Target(
        "burst of 100k at one ms, cap 20k/s: drain time within 5% of 5 s",
        5.0,
        False,
        "%",
        "burst",
        lambda r: _abs(dig(r, "burst", "capped", "drain_error_pct")),
        only="memory",
    ),
    Target(
        "burst, cap 20k/s: no 100 ms above the cap plus its 10 ms burst (110%)",
        110.0,
        False,
        "%",
        "burst",
        lambda r: dig(r, "burst", "capped", "per_100ms_max_pct_of_cap"),
        only="memory",
    ),
    *(
        Target(
            f"campaign beside reminders: other keys' p99 <= {limit} ms",
            limit,
            False,
            "ms",
            "fairness",
            lambda r: dig(r, "fairness", "keyed", "reminders_lateness", "p99_ms"),
            only=backend,
        )
        for backend, limit in (("memory", 50.0), ("redis", 100.0), ("postgres", 100.0))
    ),
    Target(
        "a keyed campaign drains at >= 0.9x the steady rate held without keys",
        0.9,
        True,
        "x",
        "fairness",
        lambda r: _per_steady(r, dig(r, "fairness", "keyed", "campaign_msgs_per_s")),
    ),
    Target(
        "a keyed campaign drains at >= 0.9x the same campaign without keys (stricter)",
        0.9,
        True,
        "x",
        "fairness",
        lambda r: dig(r, "fairness", "campaign_rate_ratio"),
    ),
    Target(
        "priority topic, idle consumers: produce-to-receive p99 <= 2 ms",
        2.0,
        False,
        "ms",
        "priority",
        lambda r: dig(r, "priority", "latency", "latency", "p99_ms"),
        only="memory",
    ),
    Target(
        "produce >= 250k msgs/s (batch 1000)",
        250_000,
        True,
        "msgs/s",
        "produce",
        lambda r: dig(r, "produce", "1000", "msgs_per_s"),
        only="memory",
    ),
    Target(
        "HTTP batch produce >= 50% of the gRPC driver's (batch 1000, same run)",
        0.5,
        True,
        "x",
        "produce",
        lambda r: dig(r, "produce", "http", "ratio_to_grpc"),
        only="memory",
    ),
    Target(
        "webhook lateness at 1k/s: p99 <= 5 ms",
        5,
        False,
        "ms",
        "webhooks",
        lambda r: dig(r, "webhooks", "p99_ms_at_1k"),
        only="memory",
    ),
    Target(
        "webhook delivery >= 10k msgs/s at p99 <= 10 ms",
        10_000,
        True,
        "msgs/s",
        "webhooks",
        lambda r: dig(r, "webhooks", "highest_rate_holding"),
        only="memory",
    ),
    Target(
        "<= 250 B broker memory / waiting message",
        250,
        False,
        "B",
        "scale",
        _first_stage("bytes_per_message"),
        only="memory",
        scale=True,
    ),
    Target(
        "idle CPU <= 0.5% with 1M waiting",
        0.5,
        False,
        "%",
        "scale",
        _first_stage("idle", "cpu_percent"),
        only="memory",
        scale=True,
    ),
)


def evaluate(results: dict[str, Any], judge: bool = True) -> list[dict[str, Any]]:
    """One row per (target, backend): measured, met, the rival's figure and the ratio.

    Without ``judge`` (a smoke run, too small to say anything of speed) a row has
    the figures and no ``met``."""
    rows: list[dict[str, Any]] = []
    poller = results.get("poller") or {}
    ran = dig(results, "config", "scenarios") or []
    for t in TARGETS:
        if t.scenario and t.scenario not in ran:
            continue
        rival = t.rival(poller) if t.rival and "steps" in (poller.get("steady") or {}) else None
        if t.rival is early_total and poller:
            rival = early_total(poller)
        if t.scale:
            scale = results.get("scale")
            sources = [("memory", scale)] if isinstance(scale, dict) and "stages" in scale else []
        else:
            sources = [
                (name, r)
                for name, r in (results.get("backends") or {}).items()
                if "skipped" not in r and "error" not in r and (t.only in (None, name))
            ]
        for name, r in sources:
            value = t.get(r)
            ratio = value / rival if value is not None and rival else None
            row = {
                "target": t.name,
                "backend": name,
                "measured": value,
                "unit": t.unit,
                "rival": rival,
                "ratio_vs_rival": round(ratio, 3) if ratio is not None else None,
            }
            if judge:
                row["met"] = t.met(value, rival)
            rows.append(row)
    return rows
