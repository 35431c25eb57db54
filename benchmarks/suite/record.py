"""The JSON record a standalone benchmark script leaves in benchmarks/results/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from suite.procstat import load_average, machine

RESULTS = Path(__file__).resolve().parent.parent / "results"


def save_record(name: str, config: dict[str, Any], results: Any, load_before: float) -> Path:
    """Write ``results/NAME.json``: the machine, the run's settings, the load
    average before and after, the figures; say where, and return the path."""
    record = {
        "benchmark": name,
        "machine": machine(),
        "config": config,
        "load_average_1min_before": load_before,
        "load_average_1min_after": load_average(),
        "results": results,
    }
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=1) + "\n")
    print(f"saved {path}")
    return path
