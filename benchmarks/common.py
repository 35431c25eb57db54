"""Shared benchmark helpers: a broker subprocess, percentiles, and saving results."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import math
import os
import platform
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"
LISTENING = "dejaq broker listening on "
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 15.0


class BrokerFailed(RuntimeError):
    """The broker process did not come up."""


@dataclass(frozen=True)
class BrokerProcess:
    address: str  # HOST:PORT
    pid: int

    def cpu_seconds(self) -> float | None:
        """User + system CPU the broker has used so far (Linux only; else None)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.asynccontextmanager
async def broker(
    storage_url: str, cwd: str | None = None, env: Mapping[str, str] | None = None
) -> AsyncIterator[BrokerProcess]:
    """Run ``dejaq broker`` on a free loopback port while the block runs.

    Stopped with SIGTERM (a graceful shutdown) at the end. ``cwd`` is where
    relative storage paths (``sqlite:///bench.db``) land; ``env`` adds
    variables (``DEJAQ_*`` broker settings) to this process's environment.
    """
    with tempfile.TemporaryFile("w+b") as errors:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "dejaq.driver.cli.main",
            "broker",
            "--listen",
            "127.0.0.1:0",
            "--storage",
            storage_url,
            "--log-level",
            "WARNING",
            stdout=asyncio.subprocess.PIPE,
            stderr=errors,
            cwd=cwd,
            env={**os.environ, **env} if env else None,
        )
        try:
            address = await _address(proc, storage_url, errors)
            yield BrokerProcess(address, proc.pid)
        finally:
            await _stop(proc)


async def _address(proc: asyncio.subprocess.Process, url: str, errors: Any) -> str:
    assert proc.stdout is not None
    said: list[str] = []  # anything else it printed, for the error message
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            while line := (await proc.stdout.readline()).decode():
                if line.startswith(LISTENING):
                    return line.removeprefix(LISTENING).split()[0]
                said.append(line.strip())
    except TimeoutError:
        raise BrokerFailed(f"broker for {url} did not start in {START_TIMEOUT_S:.0f} s") from None
    await proc.wait()
    errors.seek(0)
    said += errors.read().decode(errors="replace").strip().splitlines()
    raise BrokerFailed(f"broker for {url} exited with {proc.returncode}: {' | '.join(said[-3:])}")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), STOP_TIMEOUT_S)
        except TimeoutError:
            print(f"broker did not stop in {STOP_TIMEOUT_S:.0f} s after SIGTERM; killing it")
            proc.kill()
            await proc.wait()


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0..100) of ``values``; NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def machine() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
    }


def save(name: str, results: Mapping[str, Any]) -> Path:
    """Write ``results`` with machine info to ``benchmarks/results/<name>.json``; print a table."""
    document = {
        "benchmark": name,
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "results": results,
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(document, indent=2, default=str) + "\n")
    print_table(results)
    print(f"\nsaved {path}")
    return path


def print_table(results: Mapping[str, Any]) -> None:
    rows = list(_flatten(results))
    width = max((len(k) for k, _ in rows), default=0)
    for key, value in rows:
        print(f"{key:<{width}}  {_format(value)}")


def _flatten(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            rows.extend(_flatten(value, name + " / "))
        else:
            rows.append((name, value))
    return rows


def _format(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return str(value) if isinstance(value, int) else f"{value:.4g}"
