"""Optional: sample the broker with py-spy while a scenario runs (``--profile``).

``py-spy record --format raw`` writes collapsed stacks (``frame;frame;... count``,
each frame ``function (file:line)``); ``hot_spots`` ranks them by self time (the
innermost frame) and by inclusive time per function in dejaq's own code. Only
samples of running threads are taken (py-spy's default), so counts track CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import signal
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

RATE_HZ = 200
FRAME = re.compile(r"^(?P<func>.*) \((?P<file>[^()]*?)(?::(?P<line>\d+))?\)$")
OWN = ("/broker/", "/storage_plugins/", "/core/", "/driver/", "/fbs/", "/proto/")


def available() -> str | None:
    """The py-spy binary, or None."""
    return shutil.which("py-spy")


@contextlib.asynccontextmanager
async def record(pid: int, out: Path | None) -> AsyncIterator[None]:
    """Record ``pid`` into ``out`` (raw collapsed stacks) while the block runs; None: do nothing."""
    binary = available()
    if out is None or binary is None:
        yield
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = await asyncio.create_subprocess_exec(
        binary,
        *("record", "--pid", str(pid), "--format", "raw", "--rate", str(RATE_HZ)),
        *("--nonblocking", "-o", str(out)),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                proc.kill()
                await proc.wait()


def _short(path: str) -> str:
    for marker in OWN:
        if marker in path:
            return marker.strip("/") + "/" + path.split(marker, 1)[1]
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1]
    return path.rsplit("/lib/python", 1)[-1]


def _frame(text: str) -> tuple[str, str, str]:
    m = FRAME.match(text.strip())
    if m is None:
        return text, "", ""
    return m["func"], _short(m["file"]), m["line"] or ""


def hot_spots(path: Path, top: int = 10) -> dict[str, Any]:
    """Self time by ``file:line`` and inclusive time by dejaq function, as % of samples."""
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {"error": f"no profile at {path}"}
    for line in lines:
        stack, _, count_text = line.rpartition(" ")
        if not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [_frame(f) for f in stack.split(";") if f]
        if not frames:
            continue
        func, file, lineno = frames[-1]
        self_time[f"{func} ({file}:{lineno})"] += count
        own = {f"{fn} ({fl})" for fn, fl, _ in frames if fl.startswith(tuple(o[1:] for o in OWN))}
        for name in own:
            inclusive[name] += count
    if total == 0:
        return {"samples": 0}

    def pct(c: Counter[str]) -> list[tuple[str, float]]:
        return [(k, round(100 * v / total, 1)) for k, v in c.most_common(top)]

    return {"samples": total, "self": pct(self_time), "inclusive_dejaq": pct(inclusive)}
