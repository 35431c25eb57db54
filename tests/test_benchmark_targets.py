"""A smoke run of the benchmarks prints the targets' figures without verdicts: its
sizes are too small to judge speed. The full run judges them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"

# The steady scenario held 3,000 msgs/s on memory: under its 40k target.
RESULTS = {
    "config": {"scenarios": ["steady"]},
    "backends": {"memory": {"steady": {"steps": [], "best_rate": 3000, "early": 0}}},
}

RENDER = """
import json, sys
from suite import report
from suite.plan import FULL, SMOKE
from suite.targets import evaluate
results = json.loads(sys.argv[1])
plan = SMOKE if sys.argv[2] == "smoke" else FULL
print(report.targets_table(results, plan))
print(json.dumps(evaluate(results, judge=not plan.smoke)))
"""


def targets(plan: str) -> tuple[str, list[dict[str, object]]]:
    done = subprocess.run(
        [sys.executable, "-c", RENDER, json.dumps(RESULTS), plan],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    *table, saved = done.stdout.strip().splitlines()
    return "\n".join(table), json.loads(saved)


def test_a_smoke_run_prints_the_figures_and_no_verdict() -> None:
    table, saved = targets("smoke")
    assert "3,000" in table
    assert "MISSED" not in table
    assert " met " not in table
    assert saved and all("met" not in row for row in saved)


def test_a_full_run_judges_the_same_figures() -> None:
    table, saved = targets("full")
    assert "3,000" in table
    assert "MISSED" in table
    assert any(row.get("met") is False for row in saved)
