"""The benchmark's CPU reading of a server made of several processes
(PostgreSQL: a postmaster and a process per connection) counts them all."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

PROCSTAT = Path(__file__).resolve().parent.parent / "benchmarks" / "suite" / "procstat.py"

# A child that burns 0.4 s of CPU, then sleeps.
CHILD = """
import time
end = time.process_time() + 0.4
spins = 0
while time.process_time() < end:
    spins += 1
time.sleep(30)
"""

# A parent that stays idle while the child burns CPU, then reaps it and waits.
PARENT = f"""
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", {CHILD!r}])
print("started", flush=True)
sys.stdin.readline()
child.kill()
child.wait()
print("reaped", flush=True)
time.sleep(30)
"""


def _procstat() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_procstat", PROCSTAT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_process_tree_counts_live_children_and_reaped_ones() -> None:
    procstat = _procstat()
    with subprocess.Popen(
        [sys.executable, "-c", PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        assert parent.stdout is not None and parent.stdin is not None
        try:
            assert parent.stdout.readline().strip() == "started"
            deadline = time.monotonic() + 20
            while procstat.tree_cpu_s(parent.pid) - procstat.cpu_s(parent.pid) < 0.35:
                assert time.monotonic() < deadline, "the child's CPU never showed in the tree"
                time.sleep(0.05)
            parent.stdin.write("\n")
            parent.stdin.flush()
            assert parent.stdout.readline().strip() == "reaped"
            # the child is gone; its CPU stays counted in the parent's reaped children
            assert procstat.tree_cpu_s(parent.pid) - procstat.cpu_s(parent.pid) >= 0.35
        finally:
            parent.kill()
            parent.wait()
    assert procstat.tree_cpu_s(parent.pid) == 0.0  # gone
