"""Lateness summaries, CPU readings and small helpers shared by the scenarios."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import psutil  # type: ignore[import-untyped]

CDF_POINTS = 201  # quantiles kept in the JSON for the plots


def lateness_summary(values: npt.NDArray[np.float64]) -> dict[str, Any]:
    """p50 / p99 / p99.9 / max / mean of lateness in ms, and the early count.

    ``values`` are ``received - due`` in float ms. A message due at integer
    millisecond T may be leased from T.000 on, so any negative value is a
    delivery before its time.
    """
    if values.size == 0:
        return {"count": 0, "early": 0}
    q = np.quantile(values, [0.5, 0.99, 0.999])
    return {
        "count": int(values.size),
        "early": int(np.count_nonzero(values < 0)),
        "min_ms": round(float(values.min()), 3),
        "p50_ms": round(float(q[0]), 3),
        "p99_ms": round(float(q[1]), 3),
        "p999_ms": round(float(q[2]), 3),
        "max_ms": round(float(values.max()), 3),
        "mean_ms": round(float(values.mean()), 3),
        # for the CDF plots: lateness at 0%, 0.5%, ..., 100%
        "cdf_ms": [round(float(v), 3) for v in np.quantile(values, np.linspace(0, 1, CDF_POINTS))],
    }


def without_cdf(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in summary.items() if k != "cdf_ms"}


@dataclass
class CpuReading:
    """CPU seconds used by this process (the load client) and the broker over a block."""

    client_s: float = 0.0
    broker_s: float = 0.0
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "wall_s": round(self.wall_s, 3),
            "client_cpu_s": round(self.client_s, 2),
            "broker_cpu_s": round(self.broker_s, 2),
        }


def process_cpu_s(pid: int) -> float:
    try:
        t = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return 0.0
    return float(t.user + t.system)


@contextmanager
def cpu(broker_pid: int | None) -> Iterator[CpuReading]:
    """Which side a figure is limited by: the client's and the broker's CPU over the block."""
    r = CpuReading()
    c0, w0 = time.process_time(), time.perf_counter()
    b0 = process_cpu_s(broker_pid) if broker_pid else 0.0
    try:
        yield r
    finally:
        r.client_s = time.process_time() - c0
        r.wall_s = time.perf_counter() - w0
        r.broker_s = (process_cpu_s(broker_pid) - b0) if broker_pid else 0.0


def rss_bytes(pid: int) -> int:
    return int(psutil.Process(pid).memory_info().rss)


def available_bytes() -> int:
    return int(psutil.virtual_memory().available)


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def rate(count: int, seconds: float) -> int:
    return round(count / seconds) if seconds > 0 else 0
