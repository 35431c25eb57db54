"""The benchmark entry point refuses sizes and rates that would divide by zero
or measure nothing, before it starts anything; the runs its README shows parse."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parent.parent / "benchmarks" / "run.py"


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--priority-rate", "0"], "--priority-rate: must be above 0"),
        (["--step-s", "-1"], "--step-s: must be above 0"),
        (["--consumers", "three"], "--consumers: not a number"),
        (["--rates", "0,5000"], "--rates takes rates above 0"),
        (["--cli-rates", "1000,x"], "--cli-rates takes rates above 0"),
        (["--scan-messages", "20000,0"], "--scan-messages takes sizes above 0"),
        (["--cpu-rate", "0"], "--cpu-rate: must be above 0"),
        (["--cpu-step-s", "x"], "--cpu-step-s: not a number"),
    ],
)
def test_a_bad_number_is_refused_with_its_flag(flags: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, str(RUN), *flags], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert says in done.stderr


# run.py imports its own top-level packages (suite, scenarios): its parser is
# called in a process of its own with benchmarks/ on the path.
PARSE = """
import json, sys
sys.path.insert(0, "benchmarks")
import run
for argv in json.load(sys.stdin):
    run.parse(argv)
"""


def test_every_run_the_benchmarks_readme_shows_parses() -> None:
    # given the run.py commands benchmarks/README.md shows
    readme = RUN.with_name("README.md").read_text()
    runs = [
        shlex.split(line, comments=True)[2:]
        for line in readme.splitlines()
        if line.startswith("python benchmarks/run.py")
    ]
    assert any("--cpu-rate" in argv for argv in runs)
    # when run.py parses each, then none is refused
    done = subprocess.run(
        [sys.executable, "-c", PARSE],
        input=json.dumps(runs),
        cwd=RUN.parent.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
