"""PNG plots of a run (matplotlib, Agg backend: no display needed).

- ``<name>_throughput_vs_batch.png``: produce msgs/s by batch size, per backend
  (lean and driver clients) and the Redis sorted-set baseline, log-log.
- ``<name>_lateness_cdf.png``: one lateness CDF panel per steady rate and one
  for the burst (each backend and the baseline), plus p99 against due rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from .targets import dig

BASELINE = "redis sorted set"
P99_TARGETS = {1_000: 2.0, 20_000: 10.0}
FLOOR_MS = 0.01  # log axes: lateness below this is drawn at this
COLORS = {"memory": "tab:blue", "sqlite": "tab:orange", "redis": "tab:green", "postgres": "tab:red"}


def _ran(results: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(n, r) for n, r in (results.get("backends") or {}).items() if "skipped" not in r]


def _points(xs: Sequence[int], ys: Sequence[Any]) -> tuple[list[int], list[float]]:
    pairs = [(x, float(y)) for x, y in zip(xs, ys, strict=True) if y]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def throughput_vs_batch(results: dict[str, Any], batches: Sequence[int], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name, r in _ran(results):
        for mode, style in (("lean", "-o"), ("driver", "--s")):
            xs, ys = _points(
                batches, [dig(r, "produce", mode, str(b), "msgs_per_s") for b in batches]
            )
            if xs:
                ax.plot(
                    xs, ys, style, color=COLORS.get(name), label=f"dejaq {name} ({mode} client)"
                )
    base = results.get("baseline") or {}
    xs, ys = _points(batches, [dig(base, "produce", str(b), "msgs_per_s") for b in batches])
    if xs:
        ax.plot(xs, ys, "k:^", label=f"{BASELINE} (ZADD+HSET pipeline)")
    ax.axhline(250_000, color="red", lw=0.8, ls="--", label="target 250k msgs/s (memory)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(batches), [str(b) for b in batches])
    ax.set_xlabel("messages per frame (batch size)")
    ax.set_ylabel("produce throughput, msgs/s")
    in_flight = dig(results, "config", "in_flight")
    ax.set_title(f"Produce throughput vs batch size (100-byte payloads, {in_flight} in flight)")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _cdf(ax: Any, summary: dict[str, Any] | None, label: str, **style: Any) -> None:
    points = (summary or {}).get("cdf_ms")
    if not points:
        return
    xs = [max(v, FLOOR_MS) for v in points]
    ys = [i / (len(points) - 1) for i in range(len(points))]
    ax.plot(xs, ys, label=label, lw=1.4, **style)


def _p99_vs_rate(ax: Any, results: dict[str, Any], rates: Sequence[int]) -> None:
    base = results.get("baseline") or {}
    series = [(f"dejaq {n}", r, {"color": COLORS.get(n), "marker": "o"}) for n, r in _ran(results)]
    series.append((BASELINE, base, {"color": "k", "ls": ":", "marker": "^"}))
    for label, r, style in series:
        xs, ys = _points(rates, [dig(r, "lateness", str(x), "lateness", "p99_ms") for x in rates])
        if xs:
            ax.plot(xs, [max(y, FLOOR_MS) for y in ys], label=label, **style)
    for rate, limit in P99_TARGETS.items():
        ax.plot([rate], [limit], "rv", ms=9, label="p99 target" if rate == 1_000 else None)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(list(rates), [f"{x // 1000}k" for x in rates])
    ax.set_xlabel("due rate, messages/s")
    ax.set_ylabel("p99 lateness, ms (log)")
    ax.set_title("p99 lateness vs due rate")
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)


def lateness_cdfs(results: dict[str, Any], rates: Sequence[int], path: Path) -> Path:
    keys = [str(r) for r in rates] + ["burst"]
    cols = 3
    rows = (len(keys) + 1 + cols - 1) // cols
    fig, grid = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows))
    axes = list(grid.flat)
    base = results.get("baseline") or {}
    for ax, key in zip(axes, keys, strict=False):
        for name, r in _ran(results):
            _cdf(ax, dig(r, "lateness", key, "lateness"), f"dejaq {name}", color=COLORS.get(name))
        poll = base.get("poll_ms")
        _cdf(
            ax,
            dig(base, "lateness", key, "lateness"),
            f"{BASELINE} ({poll} ms poll)",
            color="k",
            ls=":",
        )
        if key == "burst":
            ax.set_title(f"burst: {dig(results, 'config', 'burst') or 0:,} due at one ms")
        else:
            ax.set_title(f"steady {int(key):,} due/s")
            if int(key) in P99_TARGETS:
                ax.axvline(P99_TARGETS[int(key)], color="red", lw=0.8, ls="--", label="p99 target")
        ax.axhline(0.99, color="grey", lw=0.6, ls=":")
        ax.set_xscale("log")
        ax.set_xlabel("lateness, ms (log)")
        ax.set_ylabel("fraction delivered within")
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="lower right")
    _p99_vs_rate(axes[len(keys)], results, rates)
    for ax in axes[len(keys) + 1 :]:
        ax.set_visible(False)
    fig.suptitle("Delivery lateness (received - due) CDFs; dotted grey line = p99")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def save_all(
    results: dict[str, Any], batches: Sequence[int], rates: Sequence[int], prefix: Path
) -> list[Path]:
    name = prefix.name
    return [
        throughput_vs_batch(results, batches, prefix.with_name(f"{name}_throughput_vs_batch.png")),
        lateness_cdfs(results, rates, prefix.with_name(f"{name}_lateness_cdf.png")),
    ]
