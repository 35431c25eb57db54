"""CPU time and resident memory of a process, read from ``/proc`` (Linux)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

TICK_S = 1 / os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_s(pid: int | None = None) -> float:
    """User + system CPU seconds of ``pid`` (this process when None); 0 when gone."""
    try:
        stat = Path(f"/proc/{pid or 'self'}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) * TICK_S


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and every live process under it, with what its
    exited children used (a PostgreSQL server is a postmaster and one process
    per connection); 0 when gone."""
    children: dict[int, list[int]] = {}
    own: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # exited meanwhile
        process = int(entry.name)
        children.setdefault(int(fields[1]), []).append(process)
        own[process] = (int(fields[11]) + int(fields[12])) * TICK_S
        if process == pid:
            own[process] += (int(fields[13]) + int(fields[14])) * TICK_S  # reaped children
    total, stack = 0.0, [pid]
    while stack:
        process = stack.pop()
        total += own.get(process, 0.0)
        stack.extend(children.get(process, ()))
    return total


def rss_bytes(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE
    except OSError:
        return 0


def available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


def load_average() -> float:
    return round(os.getloadavg()[0], 2)


def machine() -> dict[str, Any]:
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
    }
