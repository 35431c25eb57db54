"""What a scenario gets: the broker under test, a client, the plan, and helpers."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dejaq.core.errors import DejaqError
from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client

from . import profile
from .broker import BrokerProcess
from .plan import Plan
from .probes import BrokerProbe
from .stats import cpu
from .workers import Worker, producer_main

DROP_TIMEOUT_S = 30.0


@dataclass
class Ctx:
    backend: str
    client: Client
    broker: BrokerProcess
    plan: Plan
    workdir: Path
    profile_dir: Path | None = None
    store_pid: int | None = None  # the storage server's process, if it has one
    store_url: str = "memory://"  # the broker's storage, for a scenario that fills it directly
    store_nodes: tuple[tuple[str, int, int], ...] = ()  # a cluster's (name, pid, port)
    profiles: dict[str, Any] = field(default_factory=dict)
    _producer: Worker | None = None

    def log(self, text: str) -> None:
        print(f"[{self.backend}] {text}", flush=True)

    def probe(self) -> BrokerProbe:
        return BrokerProbe(self.broker.metrics, self.broker.pid, self.store_pid, self.store_nodes)

    async def producer(self) -> Worker:
        """The producer process for this broker (started on first use)."""
        if self._producer is None:
            worker = Worker(
                f"{self.backend}-producer",
                producer_main,
                "dejaq",
                self.broker.address,
                self.plan.in_flight,
            )
            await worker.ready()
            self._producer = worker
        return self._producer

    async def close(self) -> None:
        if self._producer is not None:
            await self._producer.stop()
            self._producer = None

    async def topic(self, label: str, settings: TopicSettings | None = None) -> str:
        name = f"bench-{label}-{uuid.uuid4().hex[:8]}"
        await Admin(self.client).create_topic(name, settings)
        return name

    async def left_in(self, name: str) -> int:
        """Messages of topic ``name`` not yet acked (waiting, due or leased)."""
        counts = (await Admin(self.client).describe_topic(name)).counts
        return counts.waiting + counts.due + counts.leased

    async def drop(self, name: str) -> None:
        """Delete a topic after its scenario (bounded; a failure is only reported)."""
        try:
            async with asyncio.timeout(DROP_TIMEOUT_S):
                await Admin(self.client).delete_topic(name)
        except (TimeoutError, DejaqError) as exc:
            self.log(f"could not delete topic {name}: {exc or 'timed out'}")


Scenario = Callable[[Ctx], Awaitable[dict[str, Any]]]


async def measured(ctx: Ctx, name: str, scenario: Scenario, timeout_s: float) -> dict[str, Any]:
    """Run one scenario under a time bound, with CPU readings (and py-spy when asked)."""
    out = ctx.profile_dir / f"{ctx.backend}-{name}.txt" if ctx.profile_dir else None
    ctx.log(f"{name} ...")
    started = time.perf_counter()
    try:
        async with profile.record(ctx.broker.pid, out):
            with cpu(ctx.broker.pid) as used:
                async with asyncio.timeout(timeout_s):
                    result = await scenario(ctx)
        result["cpu"] = used.as_dict()
    except TimeoutError:
        result = {"error": f"timed out after {timeout_s:.0f} s"}
    except Exception as exc:  # recorded and reported; the other scenarios still run
        result = {"error": f"{type(exc).__name__}: {exc}"}
        ctx.log(f"{name} FAILED: {result['error']}")
    if out is not None and out.exists():
        ctx.profiles[name] = profile.hot_spots(out)
    ctx.log(f"{name} done in {time.perf_counter() - started:.1f} s")
    return result
