"""The benchmark entry point refuses sizes and rates that would divide by zero
or measure nothing, before it starts anything."""

from __future__ import annotations

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
    ],
)
def test_a_bad_number_is_refused_with_its_flag(flags: list[str], says: str) -> None:
    done = subprocess.run(
        [sys.executable, str(RUN), *flags], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert says in done.stderr
