"""The benchmark suite: every figure through the public API (driver, CLI), against the rival.

    python benchmarks/run.py --smoke          # CI: tiny sizes, checks, no speed verdicts
    python benchmarks/run.py                  # the full run (20-40 min)
    python benchmarks/run.py --backends memory,redis,poller --scenarios steady --step-s 5
    python benchmarks/run.py --scenarios cpu --cpu-rate 20000

Per backend (memory, sqlite, redis, postgres): the backend's server when it
has one, a broker process (``dejaq broker``), and these scenarios:

- steady    a producer process and N consumer processes (the plain
            ``async for d in consumer: await d.ack()`` loop); the due rate
            steps up, each step held --step-s, until p99 lateness passes
            --p99-ms, or anything is early or left behind. The figure: the
            highest rate that held, and its ratio to the rival's.
- cpu       the steady load held at one rate (--cpu-rate, 20k/s) for
            --cpu-step-s: over the step's middle half, the CPU µs a delivered
            message of each process (producer, broker, each consumer, the
            storage server's), from /proc, and the sum's ratio to the rival's
- cli       3 x ``dejaq consume`` at 1k due/s (p50 / p99); one
            ``dejaq consume`` at rising rates until it no longer keeps up
- bulk      produce -> deliver -> ack, all due now (memory only)
- burst     100k due at one ms, drained with a 20k/s rate cap (drain time,
            per-100 ms spread) and without one (msgs/s) (memory only)
- fairness  a campaign of 1M (served backends 200k) messages of one key due
            at one ms beside 100 keys of 10 msgs/s for 30 s in the same
            topic: the other keys' lateness, the campaign's drain rate, with
            keys and the same load without (scenarios/fairness.py)
- produce   msgs/s by batch size through ``Producer.send_batch``; batches of
            1,000 over the HTTP/JSON API beside it
- priority  priority topics: one message at a time at 200/s, mixed priorities,
            idle consumer processes: produce-to-receive p50 / p99 / max, beside
            two floors (a unary round trip; a bare grpc.aio relay); a
            backlog produced with no consumer, received in priority order
            (inversions counted)
- scan      a topic of 20k, then 1M messages read back a bucket at a time
            through ``Admin.scan_bucket`` (msgs/s, µs a message), the
            broker's health and a produce probed meanwhile
- webhooks  webhook delivery to a local sink process at rising rates:
            lateness from due to the request's head, the highest rate holding
            p99 <= --p99-ms (memory only)
- wire      WIRE LIMIT, a private client, reported apart (memory only)
- scale     memory per waiting message, idle CPU, at 1M and 10M (memory)
- cluster   etcd and 3 brokers on one SQLite file: cross-broker lateness,
            rebalance time after kill -9 of a broker with a consumer
- failover, reshard  (redis-cluster) a broker with wait_replicas=1 through a
            master's kill -9 and through a live reshard: lost, early, the
            longest stall (scenarios/cluster_faults.py)
- forecast  Admin.forecast (60 bins) over 1M waiting (10M on memory): the
            call's time, the broker's storage time and the storage server's
            CPU; the dejaq_due_ahead refresh's CPU with 100 topics (memory)
- spark     1M rows from Parquet through the Spark data source on local[2]
            (dejaq spark schedule), rows/s, against dejaq produce --jsonl

and the rival, ``poller`` in --backends: a hand-rolled Redis sorted-set queue
(Lua pop-due every 1 ms in as many processes, ZREM + HDEL acks), on the
same producer schedule and step plan.

Figures print as tables; everything is saved to benchmarks/results/NAME.json.
Exit status 1 on an error, an early delivery or a lost message (in a smoke
run also on a step that did not hold or a missing figure). A backend whose
server is not installed is skipped, or fails the run under CI=true.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from scenarios import cluster, cluster_faults, cpu, forecast, poller, scale, spark, steady
from scenarios.per_backend import SCENARIOS, run_backend, unavailable
from suite import profile, report
from suite.backends import BACKENDS, RIVAL, Unavailable
from suite.plan import FULL, SMOKE, Plan
from suite.procstat import load_average, machine
from suite.targets import evaluate

RESULTS_DIR = Path(__file__).resolve().parent / "results"
ALL_SCENARIOS = (
    "steady",
    "cpu",
    "cli",
    "bulk",
    "burst",
    "fairness",
    "priority",
    "produce",
    "scan",
    "webhooks",
    "wire",
    "scale",
    "cluster",
    "spark",
    "forecast",
    *cluster_faults.FAULTS,
)
ALL_BACKENDS = (*BACKENDS, RIVAL)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, every scenario, 1 s steps: checks figures come out and nothing"
        " is lost or early; no speed verdicts (what CI runs)",
    )
    p.add_argument(
        "--backends",
        help=f"comma-separated, of {','.join(ALL_BACKENDS)} (default: all)",
    )
    p.add_argument(
        "--scenarios",
        help=f"comma-separated, of {','.join(ALL_SCENARIOS)} (default: all)",
    )
    p.add_argument("--rates", help="steady: the due rates to step through, msgs/s, comma-separated")
    p.add_argument(
        "--step-s", type=_positive(float), help="steady: seconds each step is held (full: 20)"
    )
    p.add_argument(
        "--consumers", type=_positive(int), help="steady: consumer (and poller) processes (3)"
    )
    p.add_argument(
        "--p99-ms", type=_positive(float), help="steady: a step holds at p99 <= this (10)"
    )
    p.add_argument(
        "--drain-s", type=_positive(float), help="how long stragglers may take after a step"
    )
    p.add_argument(
        "--cpu-rate", type=_positive(int), help="cpu: the due rate held, msgs/s (20,000)"
    )
    p.add_argument(
        "--cpu-step-s", type=_positive(float), help="cpu: seconds the rate is held (full: 20)"
    )
    p.add_argument("--cli-rates", help="cli: rates one `dejaq consume` is stepped through")
    p.add_argument(
        "--scan-messages", help="scan: topic sizes read back, comma-separated (20000,1000000)"
    )
    p.add_argument("--cli-step-s", type=_positive(float), help="cli: seconds each step is held")
    p.add_argument("--bulk-messages", type=_positive(int), help="bulk: messages (full: 200,000)")
    p.add_argument("--burst-messages", type=_positive(int), help="burst: messages (full: 100,000)")
    p.add_argument(
        "--burst-rate", type=_positive(int), help="burst: the rate cap, msgs/s (full: 20,000)"
    )
    p.add_argument(
        "--steady-keys",
        type=_positive(int),
        help="steady, cpu: key the messages round this many keys (default: no key)",
    )
    p.add_argument(
        "--steady-headers",
        type=_positive(int),
        help="steady, cpu: this many small headers on each message (default: none)",
    )
    p.add_argument(
        "--fair-messages", type=_positive(int), help="fairness: campaign messages (1,000,000)"
    )
    p.add_argument(
        "--fair-messages-served",
        type=_positive(int),
        help="fairness: campaign messages on a served backend (200,000)",
    )
    p.add_argument(
        "--priority-rate", type=_positive(int), help="priority: msgs/s sent one at a time (200)"
    )
    p.add_argument("--priority-s", type=_positive(float), help="priority: seconds sent (full: 20)")
    p.add_argument(
        "--priority-backlog", type=_positive(int), help="priority: backlog messages (full: 10,000)"
    )
    p.add_argument("--webhook-rates", help="webhooks: the due rates to step through, msgs/s")
    p.add_argument(
        "--webhook-step-s", type=_positive(float), help="webhooks: seconds each step is held (5)"
    )
    p.add_argument(
        "--poll-ms", type=_positive(float), help="the rival's poll period (default 1 ms)"
    )
    p.add_argument(
        "--broker-env",
        action="append",
        default=[],
        metavar="DEJAQ_NAME=VALUE",
        help="a broker setting for every broker started (repeatable)",
    )
    p.add_argument(
        "--name",
        help="results file benchmarks/results/NAME.json (default: suite, smoke, or"
        " suite_partial for a partial selection)",
    )
    p.add_argument(
        "--profile",
        action="store_true",
        help="sample each broker with py-spy during each scenario; hot spots in the JSON",
    )
    a = p.parse_args(argv)
    a.backends = _names(a.backends, ALL_BACKENDS, p)
    a.scenarios = _names(a.scenarios, ALL_SCENARIOS, p)
    pairs = [item.partition("=") for item in a.broker_env]
    if any(not k.startswith("DEJAQ_") or not sep for k, sep, _ in pairs):
        p.error("--broker-env takes DEJAQ_NAME=VALUE")
    a.broker_env = {k: v for k, _, v in pairs}
    for flag, what in (
        ("rates", "rates"),
        ("cli_rates", "rates"),
        ("webhook_rates", "rates"),
        ("scan_messages", "sizes"),
    ):
        text = getattr(a, flag)
        try:
            ok = text is None or (bool(_ints(text)) and min(_ints(text)) > 0)
        except ValueError:
            ok = False
        if not ok:
            p.error(f"--{flag.replace('_', '-')} takes {what} above 0, comma-separated: {text!r}")
    return a


def _positive(kind: Callable[[str], float]) -> Callable[[str], float]:
    """An argparse type: a number of ``kind`` above 0 (a rate or a size of 0
    would divide by zero or measure nothing)."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its message
    return parse


def _names(text: str | None, known: Sequence[str], p: argparse.ArgumentParser) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()] if text else list(known)
    unknown = [n for n in names if n not in known]
    if unknown:
        p.error(f"unknown {', '.join(unknown)} (known: {', '.join(known)})")
    return names


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(x.replace("_", "")) for x in text.split(",") if x.strip())


def plan_of(args: argparse.Namespace) -> Plan:
    plan = SMOKE if args.smoke else FULL
    changes: dict[str, Any] = {"broker_env": args.broker_env}
    for flag, name in (
        ("step_s", "step_s"),
        ("consumers", "consumers"),
        ("p99_ms", "p99_ms"),
        ("drain_s", "drain_s"),
        ("cli_step_s", "cli_step_s"),
        ("bulk_messages", "bulk_messages"),
        ("burst_messages", "burst_messages"),
        ("burst_rate", "burst_rate"),
        ("fair_messages", "fair_messages"),
        ("steady_keys", "steady_keys"),
        ("steady_headers", "steady_headers"),
        ("fair_messages_served", "fair_messages_served"),
        ("poll_ms", "poll_ms"),
        ("priority_rate", "priority_rate"),
        ("priority_s", "priority_s"),
        ("priority_backlog", "priority_backlog"),
        ("webhook_step_s", "webhook_step_s"),
        ("cpu_rate", "cpu_rate"),
        ("cpu_step_s", "cpu_step_s"),
    ):
        if getattr(args, flag) is not None:
            changes[name] = getattr(args, flag)
    if args.rates:
        changes["rates"] = _ints(args.rates)
    if args.cli_rates:
        changes["cli_rates"] = _ints(args.cli_rates)
    if args.webhook_rates:
        changes["webhook_rates"] = _ints(args.webhook_rates)
    if args.scan_messages:
        changes["scan_counts"] = _ints(args.scan_messages)
    return replace(plan, **changes)


async def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    plan = plan_of(args)
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
    for backend in args.backends:
        if backend in BACKENDS and per_backend:
            results["backends"][backend] = await run_backend(
                backend, plan, per_backend, profile_dir
            )
    rival_scenarios = [s for s in ("steady", "cpu") if s in args.scenarios]
    if RIVAL in args.backends and rival_scenarios:
        print(
            "[poller] the rival: Redis sorted set, Lua pop-due every"
            f" {plan.poll_ms:g} ms in {plan.consumers} processes",
            flush=True,
        )
        results["poller"] = await rival(plan, rival_scenarios)
    if "scale" in args.scenarios and "memory" in args.backends:
        results["scale"] = await bounded(scale.run(plan, profile_dir), scale.bound_s(plan))
    if "forecast" in args.scenarios:
        counts = {b: list(plan.forecast_counts) for b in args.backends if b in BACKENDS}
        if "memory" in counts:
            counts["memory"] = list(plan.forecast_counts_memory)
        refresh = (
            (plan.forecast_counts[0], plan.forecast_topics, 500 if plan.smoke else 5000)
            if "memory" in args.backends
            else None
        )
        results["forecast"] = await forecast.run(list(counts), counts, refresh)
        print(forecast.render(results["forecast"]), flush=True)
    if "cluster" in args.scenarios:
        print("[cluster] etcd and 3 brokers on one SQLite file", flush=True)
        results["cluster"] = await run_cluster(plan)
    if "spark" in args.scenarios:
        print("[spark] Parquet through the data source vs dejaq produce --jsonl", flush=True)
        results["spark"] = await run_spark(plan)
    faults = [f for f in cluster_faults.FAULTS if f in args.scenarios]
    if faults and "redis-cluster" in args.backends:
        results["cluster_faults"] = await run_faults(plan, faults)
    results["config"]["load_average_1min_after"] = load_average()
    results["config"]["seconds"] = round(time.perf_counter() - started, 1)

    print(report.render(results, plan))
    if "cluster_faults" in results:
        print(cluster_faults.render(results["cluster_faults"]))
    results["targets"] = evaluate(results, judge=not plan.smoke)
    found = report.problems(results, plan)
    found += spark_problems(results.get("spark"))
    found += cluster_faults.problems(results.get("cluster_faults"))
    for line in found:
        print(f"PROBLEM {line}")
    print(f"\nran in {results['config']['seconds']:.0f} s")
    save(name, results)
    return 1 if found else 0


async def rival(plan: Plan, scenarios: Sequence[str]) -> dict[str, Any]:
    """The rival's steady ramp and cpu step, each on a fresh redis-server."""
    runs = {
        "steady": lambda: bounded(poller.run(plan), steady.bound_s(plan)),
        "cpu": lambda: bounded(cpu.rival(plan), cpu.bound_s(plan)),
    }
    try:
        return {name: await runs[name]() for name in scenarios}
    except Unavailable as exc:
        return unavailable(RIVAL, str(exc))


async def run_cluster(plan: Plan) -> dict[str, Any]:
    try:
        return await bounded(cluster.run(plan), cluster.bound_s(plan))
    except Unavailable as exc:
        return unavailable("cluster", str(exc))


async def run_faults(plan: Plan, faults: list[str]) -> dict[str, Any]:
    try:
        return await bounded(cluster_faults.run(plan, faults), cluster_faults.bound_s(plan))
    except Unavailable as exc:
        return {f: unavailable("redis-cluster", str(exc)) for f in faults}


async def run_spark(plan: Plan) -> dict[str, Any]:
    try:
        return await bounded(spark.run(plan), spark.bound_s(plan))
    except Unavailable as exc:
        return unavailable("spark", str(exc))


def spark_problems(result: dict[str, Any] | None) -> list[str]:
    if result is None:
        return []
    if "error" in result:
        return [f"spark: {result['error']}"]
    if "skipped" in result:
        return []
    if result["lost"] or result["doubled"]:
        return [f"spark: {result['lost']} lost, {result['doubled']} doubled"]
    return []


def _default_name(args: argparse.Namespace) -> str:
    if args.smoke:
        return "smoke"
    whole = list(args.backends) == list(ALL_BACKENDS) and list(args.scenarios) == list(
        ALL_SCENARIOS
    )
    return "suite" if whole and not args.broker_env else "suite_partial"


async def bounded(work: Coroutine[Any, Any, dict[str, Any]], seconds: float) -> dict[str, Any]:
    try:
        async with asyncio.timeout(seconds):
            return await work
    except TimeoutError:
        return {"error": f"timed out after {seconds:.0f} s"}
    except Unavailable:
        raise
    except Exception as exc:  # recorded and reported; the run still prints what it has
        return {"error": f"{type(exc).__name__}: {exc}"}


def save(name: str, results: dict[str, Any]) -> None:
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


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
