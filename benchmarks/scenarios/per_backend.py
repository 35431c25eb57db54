"""The scenarios every backend runs, in order, against one broker per backend."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import BrokerFailed, broker
from suite.backends import Unavailable, storage_url
from suite.harness import Ctx, Scenario, measured
from suite.plan import Plan
from suite.stats import rss_bytes

from dejaq.driver.client import Client

from . import end_to_end, lateness, produce

SCENARIOS: dict[str, tuple[Scenario, float]] = {  # name -> (scenario, time bound in s)
    "produce": (produce.run, 300.0),
    "end_to_end": (end_to_end.run, 300.0),
    "lateness": (lateness.run, 600.0),
}


async def run_backend(
    name: str, plan: Plan, scenarios: Sequence[str], profile_dir: Path | None
) -> dict[str, Any]:
    """Start the backend's server (if any) and a broker on it; run ``scenarios``."""
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix=f"dejaq-bench-{name}-") as workdir:
        try:
            async with (
                storage_url(name, workdir) as url,
                broker(url, cwd=workdir, env=plan.broker_env) as proc,
                Client(proc.address) as client,
            ):
                print(f"[{name}] broker pid {proc.pid} on {proc.address}, storage {url}")
                ctx = Ctx(name, client, proc, plan, profile_dir)
                results["storage"] = url
                for scenario in scenarios:
                    if scenario in SCENARIOS:
                        run, bound = SCENARIOS[scenario]
                        results[scenario] = await measured(ctx, scenario, run, bound)
                results["broker_rss_end_bytes"] = rss_bytes(proc.pid)
                if ctx.profiles:
                    results["profile"] = ctx.profiles
        except (Unavailable, BrokerFailed) as exc:
            print(f"[{name}] skipped: {exc}")
            return {"skipped": str(exc)}
    return results
