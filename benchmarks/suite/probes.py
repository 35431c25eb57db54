"""Server-side counters read at the start and end of a step: what it cost the server.

- ``BrokerProbe``: the broker's Prometheus endpoint (``--metrics``), its CPU and
  that of the storage server's processes (Redis, PostgreSQL), if any.
  gRPC frames per second on the hot-path streams come from
  ``dejaq_stream_frames_total{stream, direction}`` (None when the broker does
  not export it); storage calls per second from
  ``dejaq_storage_operation_seconds_count``; gRPC calls (streams opened, not
  frames) from ``dejaq_grpc_requests_total``.
- ``RedisProbe``: the rival's server: ``INFO`` commands processed and CPU.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis

from . import procstat

FRAMES = "dejaq_stream_frames_total"
STORAGE_CALLS = "dejaq_storage_operation_seconds_count"
GRPC_CALLS = "dejaq_grpc_requests_total"
DELIVERED = "dejaq_delivered_total"
SCRAPE_TIMEOUT_S = 10.0


@dataclass
class Sample:
    at: float  # monotonic seconds
    cpu_s: float
    counters: dict[str, float] = field(default_factory=dict)  # "name{labels}" -> value
    store_cpu_s: float | None = None  # the storage server's processes


class Probe(Protocol):
    async def sample(self) -> Sample: ...
    def rates(self, a: Sample, b: Sample) -> dict[str, Any]: ...


def _key(name: str, labels: dict[str, str], keep: tuple[str, ...]) -> str:
    inner = ",".join(f"{k}={labels[k]}" for k in keep if k in labels)
    return f"{name}{{{inner}}}" if inner else name


class BrokerProbe:
    def __init__(
        self,
        metrics: str,
        pid: int,
        store_pid: int | None = None,
        store_nodes: tuple[tuple[str, int, int], ...] = (),
    ) -> None:
        self.url = f"http://{metrics}/metrics"
        self.pid = pid
        self.store_pid = store_pid
        self.nodes = ClusterNodes(store_nodes) if store_nodes else None

    def _scrape(self) -> str:
        with urllib.request.urlopen(self.url, timeout=SCRAPE_TIMEOUT_S) as response:
            text: str = response.read().decode()
            return text

    async def sample(self) -> Sample:
        text = await asyncio.to_thread(self._scrape)
        counters: dict[str, float] = defaultdict(float)
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name == FRAMES:
                    counters[_key(s.name, s.labels, ("stream", "direction"))] += s.value
                elif s.name == STORAGE_CALLS:
                    counters[_key(s.name, s.labels, ("operation",))] += s.value
                elif s.name in (GRPC_CALLS, DELIVERED):
                    counters[s.name] += s.value
        store = None if self.store_pid is None else procstat.tree_cpu_s(self.store_pid)
        if self.nodes is not None:
            counters.update(await self.nodes.sample())
            store = sum(v for k, v in counters.items() if k.startswith(NODE_CPU))
        return Sample(time.monotonic(), procstat.cpu_s(self.pid), dict(counters), store)

    def rates(self, a: Sample, b: Sample) -> dict[str, Any]:
        span = max(b.at - a.at, 1e-9)

        def per_s(prefix: str) -> dict[str, float]:
            return {
                k.removeprefix(prefix).strip("{}") or "all": round(
                    (v - a.counters.get(k, 0)) / span
                )
                for k, v in b.counters.items()
                if k.startswith(prefix)
            }

        frames = per_s(FRAMES)
        store = None
        if a.store_cpu_s is not None and b.store_cpu_s is not None:
            store = round(100 * (b.store_cpu_s - a.store_cpu_s) / span, 1)
        out: dict[str, Any] = {
            "cpu_percent": round(100 * (b.cpu_s - a.cpu_s) / span, 1),
            "store_cpu_percent": store,  # None: the storage runs in the broker
            # None when the broker exports no frame counter (see the README)
            "frames_per_s": sum(frames.values()) if frames else None,
            "frames_per_s_by_stream": frames or None,
            "storage_calls_per_s": sum(per_s(STORAGE_CALLS).values()),
            "storage_calls_per_s_by_op": per_s(STORAGE_CALLS),
            "grpc_calls_per_s": per_s(GRPC_CALLS).get("all"),
            "delivered_per_s": per_s(DELIVERED).get("all"),
        }
        if self.nodes is not None:
            out["store_nodes"] = self.nodes.rates(a, b, float(out["delivered_per_s"] or 0))
        return out


NODE_CPU, NODE_COMMANDS, NODE_KEYS = "node_cpu_s:", "node_commands:", "node_keys:"
NODE_SCRIPTS = "node_scripts:"


class ClusterNodes:
    """A Redis Cluster's nodes: CPU (from /proc), commands processed and keys, each."""

    def __init__(self, nodes: tuple[tuple[str, int, int], ...]) -> None:
        self.nodes = nodes

    async def sample(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, pid, port in self.nodes:
            out[NODE_CPU + name] = procstat.cpu_s(pid)
            r = Redis(port=port)
            try:
                stats = await r.info("stats")
                out[NODE_COMMANDS + name] = float(stats["total_commands_processed"])
                out[NODE_KEYS + name] = float(await r.dbsize())
                scripts = (await r.info("commandstats")).get("cmdstat_evalsha", {})
                out[NODE_SCRIPTS + name] = float(scripts.get("calls", 0))
            finally:
                await r.aclose()
        return out

    def rates(self, a: Sample, b: Sample, delivered_per_s: float) -> dict[str, dict[str, Any]]:
        """Per node: CPU %, CPU us a delivered message, commands/s (Lua's own
        calls included), scripts/s (EVALSHA), keys (the more of the step's start
        and end: the messages waiting then)."""
        span = max(b.at - a.at, 1e-9)
        out: dict[str, dict[str, Any]] = {}
        for name, _, _ in self.nodes:
            cpu_s = b.counters[NODE_CPU + name] - a.counters[NODE_CPU + name]
            commands = b.counters[NODE_COMMANDS + name] - a.counters[NODE_COMMANDS + name]
            out[name] = {
                "cpu_percent": round(100 * cpu_s / span, 1),
                "cpu_us_per_message": (
                    round(cpu_s * 1e6 / (delivered_per_s * span), 2) if delivered_per_s else None
                ),
                "commands_per_s": round(commands / span),
                "scripts_per_s": round(
                    (b.counters[NODE_SCRIPTS + name] - a.counters[NODE_SCRIPTS + name]) / span
                ),
                "keys": int(max(a.counters[NODE_KEYS + name], b.counters[NODE_KEYS + name])),
            }
        return out


class RedisProbe:
    def __init__(self, url: str) -> None:
        self.url = url

    async def sample(self) -> Sample:
        r = Redis.from_url(self.url)
        try:
            stats = await r.info("stats")
            cpu = await r.info("cpu")
        finally:
            await r.aclose()
        used = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])
        return Sample(
            time.monotonic(), used, {"commands": float(stats["total_commands_processed"])}
        )

    def rates(self, a: Sample, b: Sample) -> dict[str, Any]:
        span = max(b.at - a.at, 1e-9)
        return {
            "cpu_percent": round(100 * (b.cpu_s - a.cpu_s) / span, 1),
            "redis_commands_per_s": round((b.counters["commands"] - a.counters["commands"]) / span),
        }
