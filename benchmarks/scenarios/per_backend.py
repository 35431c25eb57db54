"""The scenarios each backend runs, in order, against one broker per backend."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from suite.backends import Unavailable, in_ci, store
from suite.broker import BrokerFailed, broker
from suite.harness import Ctx, Scenario, measured
from suite.plan import Plan
from suite.procstat import rss_bytes

from dejaq.driver.client import Client

from . import (
    bulk,
    burst,
    cli,
    cpu,
    fairness,
    priority,
    produce,
    scan,
    steady,
    webhooks,
    wire_limit,
)

# name -> (scenario, its time bound from the plan, the backends it runs on (None: all))
SCENARIOS: dict[str, tuple[Scenario, Callable[[Plan], float], tuple[str, ...] | None]] = {
    "steady": (steady.run, steady.bound_s, None),
    "cpu": (cpu.run, cpu.bound_s, None),
    "cli": (cli.run, cli.bound_s, None),
    "bulk": (bulk.run, bulk.bound_s, ("memory",)),
    "burst": (burst.run, burst.bound_s, ("memory",)),
    "fairness": (fairness.run, fairness.bound_s, None),
    "produce": (produce.run, produce.bound_s, None),
    "wire": (wire_limit.run, wire_limit.bound_s, ("memory",)),
    "priority": (priority.run, priority.bound_s, None),
    "scan": (scan.run, scan.bound_s, None),
    "webhooks": (webhooks.run, webhooks.bound_s, ("memory",)),
}
# The webhooks scenario's sink listens on loopback, which brokers refuse as a
# webhook target unless allowed.
BROKER_ENV = {"DEJAQ_WEBHOOK_ALLOW": "127.0.0.1"}


def unavailable(name: str, reason: str) -> dict[str, Any]:
    """A backend that cannot run: skipped here, an error under CI=true."""
    if in_ci():
        print(f"[{name}] ERROR (CI=true runs every backend): {reason}", flush=True)
        return {"error": f"unavailable under CI=true: {reason}"}
    print(f"[{name}] skipped: {reason}", flush=True)
    return {"skipped": reason}


async def run_backend(
    name: str, plan: Plan, scenarios: Sequence[str], profile_dir: Path | None
) -> dict[str, Any]:
    """Start the backend's server (if any) and a broker on it; run ``scenarios``."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"dejaq-bench-{name}-") as workdir:
        try:
            async with (
                store(name, workdir) as served,
                broker(served.url, cwd=workdir, env={**BROKER_ENV, **plan.broker_env}) as proc,
                Client(proc.address) as client,
            ):
                print(f"[{name}] broker pid {proc.pid} on {proc.address}, storage {served.url}")
                ctx = Ctx(
                    name, client, proc, plan, Path(workdir), profile_dir, served.pid, served.url
                )
                ctx.store_nodes = served.nodes
                results["storage"] = served.url
                try:
                    for scenario in scenarios:
                        run, bound, only = SCENARIOS[scenario]
                        if only is None or name in only:
                            results[scenario] = await measured(ctx, scenario, run, bound(plan))
                finally:
                    await ctx.close()
                results["broker_rss_end_bytes"] = rss_bytes(proc.pid)
                if ctx.profiles:
                    results["profile"] = ctx.profiles
        except (Unavailable, BrokerFailed) as exc:
            return unavailable(name, str(exc))
    return results
