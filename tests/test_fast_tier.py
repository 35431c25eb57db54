"""``pytest --fast`` (``scripts/test.sh --fast``) selects the in-process tier:
the conformance suite on memory and SQLite and no case of a served backend,
no end-to-end, cluster or Spark test, nothing marked ``long``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def collected(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_the_fast_tier_is_the_in_process_tests() -> None:
    # Given what --fast collects
    fast = collected("--fast")
    # Then the conformance suite runs on memory and SQLite only
    conformance = [t for t in fast if t.startswith("tests/storage_plugins/conformance/")]
    assert any("[memory" in t for t in conformance)
    assert any("[sqlite" in t for t in conformance)
    assert not [t for t in fast if re.search(r"[\[-](redis|postgres)[-\]]", t)]
    # and nothing of a served backend's own tests, the end-to-end tests or the long ones
    assert not [t for t in fast if "/test_redis" in t or "/test_postgres" in t]
    assert not [t for t in fast if t.startswith(("tests/e2e/", "tests/cluster/", "tests/spark/"))]
    assert not [t for t in fast if "long_walks" in t or "10k_topics" in t]
    # and the core, the broker in-process, the driver and the layer test are in it
    for part in ("tests/core/", "tests/broker/", "tests/driver/", "tests/test_layers.py"):
        assert any(t.startswith(part) for t in fast), part
