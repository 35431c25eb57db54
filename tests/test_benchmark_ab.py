"""The A/B comparison of the cpu scenario: each side's runs read from run.py's
results and set side by side, role by role, with the medians' ratio."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def _ab() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_ab", BENCHMARKS / "ab.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def a_result(broker: float, consumers: float, poller_sum: float) -> dict[str, Any]:
    us = {"producer": 3.0, "broker": broker, "consumers": consumers, "storage": None}
    return {
        "results": {
            "backends": {
                "memory": {"cpu": {"us_per_message": {**us, "sum": 3.0 + broker + consumers}}}
            },
            "poller": {"cpu": {"us_per_message": {"producer": 17.0, "sum": poller_sum}}},
        }
    }


def test_two_sides_runs_are_set_side_by_side_with_the_medians_ratio() -> None:
    ab = _ab()
    # given two runs of each side, the branch's consumers at half the base's
    base = [ab.cpu_figures(a_result(11.0, 15.0, 25.0)), ab.cpu_figures(a_result(12.0, 15.6, 26.0))]
    branch = [ab.cpu_figures(a_result(11.5, 7.5, 25.0)), ab.cpu_figures(a_result(11.5, 7.8, 26.0))]
    # when they are compared
    rows = {
        tuple(line.split()[:2]): line.split()[2:] for line in ab.table(base, branch).splitlines()
    }
    # then each role shows every run and the medians' ratio; a role nobody measured has no row
    assert rows[("memory", "consumers")] == ["15.0/15.6", "7.5/7.8", "0.50"]
    assert rows[("memory", "broker")] == ["11.0/12.0", "11.5/11.5", "1.00"]
    assert rows[("poller", "sum")] == ["25.0/26.0", "25.0/26.0", "1.00"]
    assert ("memory", "storage") not in rows


def test_saved_results_are_compared_without_running_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ab = _ab()
    # given a run's saved results on each side
    base, branch = tmp_path / "base.json", tmp_path / "branch.json"
    base.write_text(json.dumps(a_result(11.0, 15.0, 25.0)))
    branch.write_text(json.dumps(a_result(11.0, 6.0, 25.0)))
    # when they are compared as saved, then the table sets them side by side
    assert ab.main(["--saved", str(base), str(branch)]) == 0
    assert (
        "memory   consumers  15.0               6.0                0.40" in capsys.readouterr().out
    )
