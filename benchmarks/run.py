"""The benchmark suite: one entry point for every scenario, backend and the Redis baseline.

    python benchmarks/run.py [--quick] [--backends memory,sqlite,redis,postgres]
        [--scenarios produce,end_to_end,lateness,scale,baseline] [--profile]

Per backend (a broker process on loopback, the backend's server started here
when its binary exists, else the backend is skipped with the reason):

- produce      throughput by batch size (1, 10, 100, 1000 a frame, 8 in flight)
- end_to_end   produce -> due -> deliver -> ack for a large batch due now
- lateness     p50 / p99 / p99.9 / max and early count at steady due rates
               (1k, 10k, 20k, 50k per second) and for a burst at one millisecond

Once (memory backend):

- scale        broker memory per waiting message and produce rate at 1M
               (and 10M unless --quick, bounded), idle CPU with 1M waiting

And the hand-rolled Redis sorted-set delay queue on the same workloads
(``baseline``), so figures also read as ratios that survive a noisy machine.

Figures print as tables with the issue's targets (met / MISSED); everything is
saved to ``benchmarks/results/suite[_quick].json`` with PNG plots beside it.
Exit status 1 on an early delivery, a lost message, an error or a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import time
from collections.abc import Coroutine, Sequence
from dataclasses import asdict, replace
from typing import Any

from common import RESULTS_DIR, machine
from scenarios import baseline, scale
from scenarios.per_backend import SCENARIOS, run_backend
from suite import plots, profile, report
from suite.backends import BACKENDS
from suite.plan import FULL, QUICK, Plan
from suite.stats import load_average
from suite.targets import evaluate

ALL_SCENARIOS = (*SCENARIOS, "scale", "baseline")
QUICK_BACKENDS = ("memory", "sqlite", "redis")
BASELINE_BOUND_S = 600.0
SCALE_BOUND_S = 900.0  # the 10M stage is capped at 300 s of producing, see scenarios/scale.py


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help="smaller counts: the run takes ~2-3 min")
    p.add_argument(
        "--backends",
        help=f"comma-separated, of {','.join(BACKENDS)}"
        f" (default: all; with --quick {','.join(QUICK_BACKENDS)})",
    )
    p.add_argument(
        "--scenarios",
        default=",".join(ALL_SCENARIOS),
        help=f"comma-separated, of {','.join(ALL_SCENARIOS)} (default: all)",
    )
    p.add_argument(
        "--poll-ms", type=float, default=1.0, help="the baseline poller's period (default 1 ms)"
    )
    p.add_argument(
        "--broker-env",
        action="append",
        default=[],
        metavar="DEJAQ_NAME=VALUE",
        help="a broker setting for every broker started (repeatable), e.g."
        " DEJAQ_MAX_FRAME_MESSAGES=500",
    )
    p.add_argument(
        "--name",
        help="results name: benchmarks/results/NAME.json and NAME_*.png (default suite,"
        " suite_quick; with a partial --backends / --scenarios selection suite_partial,"
        " suite_quick_partial, so a partial run does not overwrite a whole one)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="sample the broker with py-spy during each scenario; hot spots in the JSON",
    )
    a = p.parse_args(argv)
    a.backends = _names(a.backends, QUICK_BACKENDS if a.quick else BACKENDS, BACKENDS, p)
    a.scenarios = _names(a.scenarios, ALL_SCENARIOS, ALL_SCENARIOS, p)
    pairs = [item.partition("=") for item in a.broker_env]
    if any(not k.startswith("DEJAQ_") or not sep for k, sep, _ in pairs):
        p.error("--broker-env takes DEJAQ_NAME=VALUE")
    a.broker_env = {k: v for k, _, v in pairs}
    return a


def _names(
    text: str | None, default: Sequence[str], known: Sequence[str], p: argparse.ArgumentParser
) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()] if text else list(default)
    unknown = [n for n in names if n not in known]
    if unknown:
        p.error(f"unknown {', '.join(unknown)} (known: {', '.join(known)})")
    return names


async def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    plan = replace(QUICK if args.quick else FULL, poll_ms=args.poll_ms, broker_env=args.broker_env)
    name = args.name or _default_name(args)
    profile_dir = RESULTS_DIR / f"{name}_profiles" if args.profile else None
    if args.profile and profile.available() is None:
        print("--profile: py-spy is not installed (pip install py-spy); not profiling")
        profile_dir = None
    started = time.perf_counter()
    results: dict[str, Any] = {
        "config": {
            **asdict(plan),
            "backends": args.backends,
            "scenarios": args.scenarios,
            "load_average_1min_before": load_average(),
        },
        "backends": {},
    }
    per_backend = [s for s in args.scenarios if s in SCENARIOS]
    if per_backend:
        for backend in args.backends:
            results["backends"][backend] = await run_backend(
                backend, plan, per_backend, profile_dir
            )
    if "baseline" in args.scenarios:
        parts = [*per_backend, "idle"] if "scale" in args.scenarios else per_backend
        print("[baseline] redis sorted-set delay queue ...", flush=True)
        results["baseline"] = await bounded(baseline.run(plan, parts), BASELINE_BOUND_S)
    if "scale" in args.scenarios:
        results["scale"] = await bounded(scale.run(plan, profile_dir), SCALE_BOUND_S)
    results["config"]["load_average_1min_after"] = load_average()
    results["config"]["seconds"] = round(time.perf_counter() - started, 1)

    print(report.render(results, plan.batch_sizes, plan.rates))
    results["targets"] = evaluate(results)
    found = report.problems(results)
    for line in found:
        print(f"PROBLEM {line}")
    print(f"\nran in {results['config']['seconds']:.0f} s")
    save(name, results, plan)
    ran = [b for b, r in results["backends"].items() if "skipped" not in r]
    return 1 if found or (per_backend and not ran) else 0


def _default_name(args: argparse.Namespace) -> str:
    name = "suite_quick" if args.quick else "suite"
    whole = list(QUICK_BACKENDS if args.quick else BACKENDS)
    if args.backends != whole or args.scenarios != list(ALL_SCENARIOS) or args.broker_env:
        name += "_partial"
    return name


async def bounded(work: Coroutine[Any, Any, dict[str, Any]], seconds: float) -> dict[str, Any]:
    try:
        async with asyncio.timeout(seconds):
            return await work
    except TimeoutError:
        return {"error": f"timed out after {seconds:.0f} s"}


def save(name: str, results: dict[str, Any], plan: Plan) -> None:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    document = {
        "benchmark": name,
        "timestamp": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "results": results,
    }
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(document, indent=1, default=str) + "\n")
    print(f"saved {path}")
    for png in plots.save_all(results, plan.batch_sizes, plan.rates, RESULTS_DIR / name):
        print(f"saved {png}")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
