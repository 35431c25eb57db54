"""Forecast: the Forecast call's time and storage cost, and the due-ahead refresh's CPU.

Per backend: an embedded broker (``dejaq.driver.embedded``, metrics on) on
the backend's storage, one topic (64 buckets) filled through
``Producer.send_batch`` with ``count`` messages spread uniformly between 10
and 60 minutes ahead, so every one falls in the forecast (the most a range
count reads). Then ``Admin.forecast(topic, 1 h, 1 min)`` (60 bins), called
``CALLS`` times:

- api_ms: the call through the driver and gRPC (median, max);
- storage_ms: the broker's own ``Storage.forecast`` time per call, from its
  ``dejaq_storage_operation_seconds{operation="forecast"}`` histogram;
- server_cpu_ms: the storage server's CPU per call (redis-server; the
  PostgreSQL postmaster and backends), where there is a server;
- exact: the bins add up to every message produced.

Refresh (memory): ``refresh_topics`` topics of ``count / refresh_topics``
messages each, the broker idle for six refresh intervals (5 s each; 0.5 s in a
smoke run): the ``forecast`` storage time
the ``dejaq_due_ahead`` refresh spent (six range counts a topic every 5 s),
as % of one core, beside the whole process's CPU over the same time (the
embedded broker shares this process with the client: an upper bound).
"""

from __future__ import annotations

import asyncio
import re
import statistics
import tempfile
import time
import urllib.request
from typing import Any

from suite.backends import Unavailable, store
from suite.procstat import cpu_s, tree_cpu_s

from dejaq.core.clock import now_ms
from dejaq.driver import Admin, Client, Producer, TopicSettings, embedded
from dejaq.driver.producer import Outgoing

CALLS = 7
BATCH = 1000
IN_FLIGHT = 8
MINUTE_MS = 60_000
HOUR_MS = 60 * MINUTE_MS
REFRESH_MS = 5000  # the broker's default metrics_refresh_ms
IDLE_REFRESHES = 6  # refresh intervals the idle broker is watched for
SETTLE_S = 300.0  # the longest wait for a refresh of every topic after the fill
WINDOWS = 6  # the range counts a topic's refresh asks (dejaq_due_ahead's windows)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _forecast_seconds(port: int) -> tuple[float, int]:
    """The broker's total seconds and count of storage forecast calls so far."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    found = {}
    for part in ("sum", "count"):
        m = re.search(
            rf'^dejaq_storage_operation_seconds_{part}\{{[^}}]*operation="forecast"[^}}]*'
            rf'outcome="ok"[^}}]*\}} (\S+)$',
            text,
            re.MULTILINE,
        )
        found[part] = float(m.group(1)) if m else 0.0
    return found["sum"], int(found["count"])


async def _fill(client: Client, topic: str, count: int, seed: int) -> float:
    """Produce ``count`` messages due 10 to 60 minutes ahead; msgs/s."""
    start = now_ms() + 10 * MINUTE_MS
    span = 50 * MINUTE_MS
    started = time.perf_counter()
    async with Producer(client, topic) as producer:
        queue = list(range(0, count, BATCH))

        async def worker() -> None:
            while queue:
                first = queue.pop()
                batch = [
                    Outgoing(b"x", start + (i * 7919 + seed) % span, id=f"m{i}")
                    for i in range(first, min(first + BATCH, count))
                ]
                await producer.send_batch(batch)

        await asyncio.gather(*(worker() for _ in range(IN_FLIGHT)))
    return count / (time.perf_counter() - started)


async def one_backend(name: str, count: int, server_pid: int | None, url: str) -> dict[str, Any]:
    port = _free_port()
    async with embedded(url, metrics=f"127.0.0.1:{port}", timeout_s=120.0) as client:
        admin = Admin(client)
        await admin.create_topic("forecast", TopicSettings(buckets=64))
        fill_rate = await _fill(client, "forecast", count, seed=1)
        await admin.forecast("forecast", HOUR_MS, MINUTE_MS)  # warm
        api: list[float] = []
        total = 0
        sum_before, n_before = await asyncio.to_thread(_forecast_seconds, port)
        server_before = tree_cpu_s(server_pid) if server_pid else 0.0
        for _ in range(CALLS):
            t = time.perf_counter()
            result = await admin.forecast("forecast", HOUR_MS, MINUTE_MS)
            api.append((time.perf_counter() - t) * 1000)
            total = result.total
        server_after = tree_cpu_s(server_pid) if server_pid else 0.0
        sum_after, n_after = await asyncio.to_thread(_forecast_seconds, port)
        calls = max(1, n_after - n_before)
        out: dict[str, Any] = {
            "waiting": count,
            "fill_msgs_per_s": round(fill_rate),
            "bins": 60,
            "api_ms": {"median": round(statistics.median(api), 2), "max": round(max(api), 2)},
            # the due-ahead refresh may have run meanwhile: its calls are in the mean too
            "storage_ms_per_call": round((sum_after - sum_before) / calls * 1000, 2),
            "exact": total == count,
            "counted": total,
        }
        if server_pid:
            out["server_cpu_ms_per_call"] = round((server_after - server_before) / CALLS * 1000, 2)
        return out


async def refresh_cpu(count: int, topics: int, refresh_ms: int) -> dict[str, Any]:
    port = _free_port()
    async with embedded(
        "memory://", metrics=f"127.0.0.1:{port}", timeout_s=120.0, metrics_refresh_ms=refresh_ms
    ) as client:
        admin = Admin(client)
        per_topic = count // topics
        for t in range(topics):
            await admin.create_topic(f"t{t:03d}", TopicSettings(buckets=64))
            await _fill(client, f"t{t:03d}", per_topic, seed=t)
        # A refresh that ran during the fill took long (the loop was busy) and
        # waits BUDGET times that: measure once one has run on the idle broker.
        _, n_filled = await asyncio.to_thread(_forecast_seconds, port)
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            _, n = await asyncio.to_thread(_forecast_seconds, port)
            if n - n_filled >= WINDOWS * topics:
                break
        sum_before, n_before = await asyncio.to_thread(_forecast_seconds, port)
        cpu_before, wall_before = cpu_s(), time.perf_counter()
        await asyncio.sleep(IDLE_REFRESHES * refresh_ms / 1000)
        cpu_after, wall_after = cpu_s(), time.perf_counter()
        sum_after, n_after = await asyncio.to_thread(_forecast_seconds, port)
        wall = wall_after - wall_before
        return {
            "topics": topics,
            "waiting": per_topic * topics,
            "idle_s": round(wall, 1),
            "forecast_calls": n_after - n_before,
            "forecast_cpu_percent": round((sum_after - sum_before) / wall * 100, 3),
            "process_cpu_percent": round((cpu_after - cpu_before) / wall * 100, 2),
        }


async def run(
    backends: list[str], counts: dict[str, list[int]], refresh: tuple[int, int, int] | None
) -> dict[str, Any]:
    """``counts``: the waiting counts for each backend; ``refresh``: (messages,
    topics, refresh interval in ms) for the refresh figure, or None."""
    results: dict[str, Any] = {"backends": {}}
    for name in backends:
        entry: dict[str, Any] = {}
        for count in counts.get(name, []):
            print(f"[forecast] {name}: {count:,} waiting", flush=True)
            with tempfile.TemporaryDirectory(prefix="dejaq-forecast-") as workdir:
                try:
                    async with store(name, workdir) as served:
                        entry[str(count)] = await one_backend(name, count, served.pid, served.url)
                except Unavailable as exc:
                    entry[str(count)] = {"skipped": str(exc)}
        results["backends"][name] = entry
    if refresh is not None:
        messages, topics, refresh_ms = refresh
        print(f"[forecast] refresh: {topics} topics, {messages:,} waiting, memory", flush=True)
        results["refresh"] = await refresh_cpu(messages, topics, refresh_ms)
    return results


def render(results: dict[str, Any]) -> str:
    lines = ["", "== forecast: 60 bins of 1 min over the waiting messages =="]
    head = f"  {'backend':<9}{'waiting':>12}{'api med ms':>12}{'api max ms':>12}"
    lines.append(head + f"{'storage ms':>12}{'server CPU ms':>15}{'exact':>7}")
    for name, entry in results.get("backends", {}).items():
        for count, r in entry.items():
            if "skipped" in r:
                lines.append(f"  {name:<9}{int(count):>12,}  skipped: {r['skipped']}")
                continue
            server = r.get("server_cpu_ms_per_call", "-")
            lines.append(
                f"  {name:<9}{r['waiting']:>12,}{r['api_ms']['median']:>12}{r['api_ms']['max']:>12}"
                f"{r['storage_ms_per_call']:>12}{server!s:>15}{r['exact']!s:>7}"
            )
    refresh = results.get("refresh")
    if refresh:
        lines.append(
            f"  refresh: {refresh['topics']} topics, {refresh['waiting']:,} waiting (memory):"
            f" forecast {refresh['forecast_cpu_percent']}% of a core"
            f" ({refresh['forecast_calls']} calls in {refresh['idle_s']} s);"
            f" whole process {refresh['process_cpu_percent']}%"
        )
    return "\n".join(lines)
