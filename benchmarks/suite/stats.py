"""Lateness summaries and small helpers shared by the scenarios."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from . import procstat

F64 = npt.NDArray[np.float64]
CDF_POINTS = 101  # quantiles kept in the JSON for the plots


def lateness_summary(values: F64, early: int, cdf: bool = False) -> dict[str, Any]:
    """p50 / p99 / p99.9 / max / mean of lateness (ms) and the early count.

    ``values`` are ``received - due`` in float ms; ``early`` is counted by the
    caller on integer milliseconds (``now_ms() < timestamp_ms``), the clock
    the broker judges "due" by.
    """
    if values.size == 0:
        return {"count": 0, "early": early}
    q = np.quantile(values, [0.5, 0.99, 0.999])
    out: dict[str, Any] = {
        "count": int(values.size),
        "early": early,
        "p50_ms": round(float(q[0]), 2),
        "p99_ms": round(float(q[1]), 2),
        "p999_ms": round(float(q[2]), 2),
        "max_ms": round(float(values.max()), 2),
        "mean_ms": round(float(values.mean()), 2),
    }
    if cdf:
        points = np.quantile(values, np.linspace(0, 1, CDF_POINTS))
        out["cdf_ms"] = [round(float(v), 2) for v in points]
    return out


def rate(count: int, seconds: float) -> int:
    return round(count / seconds) if seconds > 0 else 0


@dataclass
class CpuReading:
    """CPU seconds of this process (the load client) and the broker over a block."""

    client_s: float = 0.0
    broker_s: float = 0.0
    wall_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "wall_s": round(self.wall_s, 3),
            "client_cpu_s": round(self.client_s, 2),
            "broker_cpu_s": round(self.broker_s, 2),
        }


@contextmanager
def cpu(broker_pid: int | None) -> Iterator[CpuReading]:
    """Which side limited a figure: this process's and the broker's CPU over the block."""
    r = CpuReading()
    c0, w0 = time.process_time(), time.perf_counter()
    b0 = procstat.cpu_s(broker_pid) if broker_pid else 0.0
    try:
        yield r
    finally:
        r.client_s = time.process_time() - c0
        r.wall_s = time.perf_counter() - w0
        r.broker_s = (procstat.cpu_s(broker_pid) - b0) if broker_pid else 0.0
