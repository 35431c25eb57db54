"""The cpu scenario's arithmetic: each process's CPU a delivered message over the
steady middle of a step, its roles, and the table beside the Redis poller."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
NS_PER_MS = 1_000_000


def _cpu_cost() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_cpu_cost", BENCHMARKS / "suite" / "cpu_cost.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up by name
    spec.loader.exec_module(module)
    return module


cpu_cost = _cpu_cost()


def test_the_window_is_the_middle_half_of_the_step() -> None:
    # given a step whose messages fall due over 20 s
    first, last = 1_000_000.0, 1_020_000.0
    # when its steady window is chosen
    start, end = cpu_cost.steady_window(first, last)
    # then the first and last 5 s (ramp-up, drain) are left out
    assert (start, end) == (1_005_000.0, 1_015_000.0)
    assert cpu_cost.steady_window(first, last, trim=0.0) == (first, last)


@pytest.mark.parametrize(("first", "last", "trim"), [(10.0, 10.0, 0.25), (0.0, 100.0, 0.5)])
def test_an_empty_step_or_window_is_refused(first: float, last: float, trim: float) -> None:
    with pytest.raises(ValueError):
        cpu_cost.steady_window(first, last, trim)


def test_only_deliveries_inside_the_window_count() -> None:
    # given deliveries taken before, at the start of, inside, at the end of and after a window
    received_ms = [999, 1000, 1500, 1999, 2000, 2500]
    received_ns = [ms * NS_PER_MS for ms in received_ms]
    # then the start counts, the end does not
    assert cpu_cost.delivered_within(received_ns, 1000.0, 2000.0) == 3
    assert cpu_cost.delivered_within([], 1000.0, 2000.0) == 0


def test_cpu_seconds_over_the_window_become_microseconds_a_message() -> None:
    # given the broker used 0.5 s and a consumer 0.2 s while 10,000 messages were delivered
    before = {"broker": 10.0, "consumer-0": 3.0}
    after = {"broker": 10.5, "consumer-0": 3.2}
    # then they cost 50 and 20 µs a message
    per = cpu_cost.us_per_message(before, after, 10_000)
    assert per == pytest.approx({"broker": 50.0, "consumer-0": 20.0})
    # and with nothing delivered there is no figure, rather than a division by zero
    assert cpu_cost.us_per_message(before, after, 0) == {"broker": None, "consumer-0": None}


def test_roles_add_up_the_consumers_in_order_and_the_sum_of_every_process() -> None:
    per = {
        "producer": 10.0,
        "broker": 40.0,
        "consumer-10": 3.0,
        "consumer-2": 2.0,
        "consumer-0": 1.0,
        "storage": 20.0,
    }
    roles = cpu_cost.by_role(per)
    assert roles == {
        "producer": 10.0,
        "broker": 40.0,
        "consumers": 6.0,
        "each_consumer": [1.0, 2.0, 3.0],
        "storage": 20.0,
        "sum": 76.0,
    }


def test_a_load_without_a_broker_or_a_storage_server_sums_what_it_has() -> None:
    # the rival has no broker; memory:// has no storage server
    roles = cpu_cost.by_role({"producer": 5.0, "consumer-0": 7.0, "storage": 8.0})
    assert roles["broker"] is None
    assert roles["sum"] == 20.0
    roles = cpu_cost.by_role({"producer": 5.0, "broker": 30.0, "consumer-0": 7.0})
    assert roles["storage"] is None
    assert roles["sum"] == 42.0


def test_no_sum_when_a_process_has_no_figure() -> None:
    roles = cpu_cost.by_role({"producer": None, "broker": None, "consumer-0": None})
    assert roles["sum"] is None
    assert roles["consumers"] is None


def test_a_window_reading_gives_the_delivered_rate_and_each_roles_cost() -> None:
    # given readings 2 s apart and 4,000 deliveries inside them (and 2 outside)
    start, end = 10_000.0, 12_000.0
    received_ns = [int((start + i / 2) * NS_PER_MS) for i in range(4000)]
    received_ns += [int((start - 1) * NS_PER_MS), int(end * NS_PER_MS)]
    before = {"producer": 1.0, "broker": 2.0, "consumer-0": 0.5, "consumer-1": 0.5}
    after = {"producer": 1.04, "broker": 2.2, "consumer-0": 0.54, "consumer-1": 0.56}
    # when the window's figures are made
    got = cpu_cost.window_figures(start, end, before, after, received_ns)
    # then
    assert got["delivered"] == 4000
    assert got["delivered_per_s"] == 2000
    assert got["seconds"] == 2.0
    assert got["us_per_message"] == {
        "producer": 10.0,
        "broker": 50.0,
        "consumers": 25.0,
        "each_consumer": [10.0, 15.0],
        "storage": None,
        "sum": 85.0,
    }


def test_a_meter_that_never_read_its_window_says_so() -> None:
    meter = cpu_cost.Meter({"producer": lambda: 0.0})
    assert "error" in meter.figures([])


def test_the_table_sets_each_sum_beside_the_pollers() -> None:
    dejaq = {
        "rate": 20_000,
        "delivered_per_s": 19_990,
        "kept_up": True,
        "us_per_message": cpu_cost.by_role(
            {"producer": 10.0, "broker": 50.0, "consumer-0": 10.0, "consumer-1": 10.0}
        ),
    }
    rival = {
        "rate": 20_000,
        "delivered_per_s": 20_010,
        "us_per_message": cpu_cost.by_role({"producer": 5.0, "consumer-0": 15.0, "storage": 20.0}),
    }
    rows = cpu_cost.rows([("memory", dejaq), ("sqlite", {"error": "boom"})], rival)
    assert [r[0] for r in rows] == ["memory", cpu_cost.RIVAL_ROW]
    memory, poller = rows
    assert memory[1:] == [20_000, 19_990, True, 10.0, 50.0, 20.0, "10.0/10.0", None, 80.0, 2.0]
    assert poller[-2:] == [40.0, 1.0]
    # without the rival's figure, no ratio
    assert cpu_cost.rows([("memory", dejaq)], None)[0][-1] is None


RENDER = """
import json, sys
from suite import report
from suite.plan import SMOKE
results = json.loads(sys.argv[1])
print(report.cpu_table(results, SMOKE))
print(json.dumps(report.missing_figures(results)))
"""


def _render(results: dict[str, object]) -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", RENDER, json.dumps(results)],
        cwd=BENCHMARKS,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    *table, missing = done.stdout.strip().splitlines()
    return "\n".join(table), json.loads(missing)


def test_a_run_of_the_cpu_scenario_alone_prints_its_table_and_misses_no_figure() -> None:
    us = {"producer": 10.0, "broker": 50.0, "consumers": 20.0, "each_consumer": [10.0, 10.0]}
    results = {
        "config": {"scenarios": ["cpu"]},
        "backends": {
            "memory": {"cpu": {"rate": 2000, "us_per_message": {**us, "sum": 80.0}}},
            "redis": {"cpu": {"rate": 2000, "us_per_message": {**us, "sum": None}}},
        },
        "poller": {"cpu": {"rate": 2000, "us_per_message": {"sum": 40.0}}},
    }
    table, missing = _render(results)
    assert "cpu: CPU µs a delivered message" in table
    assert "redis poller (rival)" in table
    assert [line.split()[-1] for line in table.splitlines() if line.startswith("memory")] == ["2"]
    # the poller ran no steady ramp: only redis's missing cpu figure is missing
    assert missing == ["redis: no cpu figure"]
