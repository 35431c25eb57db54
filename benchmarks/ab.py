"""A/B of the cpu scenario: two checkouts' builds run alternately on this machine.

    python benchmarks/ab.py BASE BRANCH [--runs 2] [-- RUN.PY ARGUMENTS]

``BASE`` and ``BRANCH`` are checkouts, each bootstrapped (its ``.venv``, with
its own build: compiled or pure, as installed). Each run is
``CHECKOUT/.venv/bin/python CHECKOUT/benchmarks/run.py ARGUMENTS --name ab-...``,
base first, then the branch, ``--runs`` times (default arguments: ``--scenarios
cpu --cpu-rate 20000 --backends memory,redis,poller``). Alternating spreads
the machine's drift over both sides; the table gives, a process role of each
backend (and of the poller), the µs a delivered message of every run and the
medians' ratio, branch over base. On a shared machine the figures are noisy:
compare medians of several runs, not one.

    python benchmarks/ab.py --saved BASE.json[,...] BRANCH.json[,...]

sets results run.py saved already side by side (CI compares its smoke run's
with itself: the comparison works, no figure is judged).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

DEFAULT_ARGS = ["--scenarios", "cpu", "--cpu-rate", "20000", "--backends", "memory,redis,poller"]
ROLES = ("producer", "broker", "consumers", "storage", "sum")

Figures = dict[tuple[str, str], float]  # (backend, role) -> µs a delivered message


def cpu_figures(result: Mapping[str, Any]) -> Figures:
    """The cpu scenario's µs a delivered message by (backend, role) in a run.py result."""
    out: Figures = {}
    for backend, cpu in _cpu_results(result.get("results", {})):
        us = cpu.get("us_per_message") or {}
        for role in ROLES:
            value = us.get(role)
            if isinstance(value, (int, float)):
                out[(backend, role)] = float(value)
    return out


def _cpu_results(results: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for backend, scenarios in (results.get("backends") or {}).items():
        if isinstance(scenarios, Mapping) and isinstance(scenarios.get("cpu"), Mapping):
            yield backend, scenarios["cpu"]
    rival = results.get("poller")
    if isinstance(rival, Mapping) and isinstance(rival.get("cpu"), Mapping):
        yield "poller", rival["cpu"]


def table(base: Sequence[Figures], branch: Sequence[Figures]) -> str:
    """Each (backend, role) both sides measured: every run's figure, and the medians' ratio."""
    keys = sorted({k for f in [*base, *branch] for k in f}, key=_order)
    lines = ["backend  role       base runs          branch runs        ratio"]
    for key in keys:
        a = [f[key] for f in base if key in f]
        b = [f[key] for f in branch if key in f]
        ratio = (
            f"{statistics.median(b) / statistics.median(a):.2f}"
            if a and b and statistics.median(a)
            else "-"
        )
        lines.append(f"{key[0]:<8} {key[1]:<10} {_runs(a):<18} {_runs(b):<18} {ratio}")
    return "\n".join(lines)


def _order(key: tuple[str, str]) -> tuple[str, int]:
    return key[0], ROLES.index(key[1]) if key[1] in ROLES else len(ROLES)


def _runs(values: Sequence[float]) -> str:
    return "/".join(f"{v:.1f}" for v in values) or "-"


def run_once(checkout: Path, label: str, args: Sequence[str]) -> Figures:
    name = f"ab-{label}"
    python = checkout / ".venv" / "bin" / "python"
    command = [str(python), str(checkout / "benchmarks" / "run.py"), *args, "--name", name]
    print(f"[ab] {label}: {' '.join(command)}", flush=True)
    saved = checkout / "benchmarks" / "results" / f"{name}.json"
    saved.unlink(missing_ok=True)
    done = subprocess.run(command, cwd=checkout, check=False)
    if done.returncode:  # a scenario's problem: what it measured still counts
        print(f"[ab] {label}: run.py exited {done.returncode}", flush=True)
    return cpu_figures(json.loads(saved.read_text())) if saved.exists() else {}


def _saved(paths: str) -> list[Figures]:
    return [cpu_figures(json.loads(Path(p).read_text())) for p in paths.split(",")]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base", type=Path)
    parser.add_argument("branch", type=Path)
    parser.add_argument("--runs", type=int, default=2, help="runs a side, alternating (2)")
    parser.add_argument(
        "--saved", action="store_true", help="BASE and BRANCH are run.py results (comma-separated)"
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    # run.py's arguments follow "--", taken apart here: argparse would read them as its own
    rest = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.saved:
        print(table(_saved(str(args.base)), _saved(str(args.branch))))
        return 0
    run_args = rest or DEFAULT_ARGS
    base: list[Figures] = []
    branch: list[Figures] = []
    for n in range(args.runs):
        base.append(run_once(args.base.resolve(), f"base-{n}", run_args))
        branch.append(run_once(args.branch.resolve(), f"branch-{n}", run_args))
    print(table(base, branch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
