"""Bulk scheduling from Spark against ``dejaq produce --jsonl``, same rows, same run.

N rows (1M full, 20k smoke; 100-byte payloads, ids given, due in the next
day) are written once as Parquet and once as JSON lines. Two topics on one
``memory://`` broker process receive them:

- ``dejaq spark schedule --input rows.parquet --master local[2]`` (the data
  source through the CLI job, as a user runs it); the figure is the write's
  rows/s as the job prints it (from the first task to the commit: Spark's
  start-up and reading the input's schema are left out, and reported apart);
- ``dejaq produce TOPIC --jsonl rows.jsonl`` (one process, batches of 1,000).

Checked: each topic then holds N messages (nothing lost, nothing doubled).
Target: >= 100k rows/s, and >= 0.5x the direct produce rate.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from suite.backends import Unavailable
from suite.broker import broker, dejaq_command
from suite.plan import Plan

from dejaq.driver.admin import Admin
from dejaq.driver.client import Client

FULL_ROWS = 1_000_000
SMOKE_ROWS = 20_000
PAYLOAD_BYTES = 100
RATE = re.compile(r"in ([\d.]+) s \(([\d,]+) rows/s\)")
TARGET_ROWS_S = 100_000
TARGET_RATIO = 0.5


def rows_of(plan: Plan) -> int:
    return SMOKE_ROWS if plan.smoke else FULL_ROWS


def bound_s(plan: Plan) -> float:
    return 180.0 if plan.smoke else 900.0


def _inputs(folder: Path, rows: int) -> tuple[Path, Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = int(time.time() * 1000) + 86_400_000
    payload = "x" * (PAYLOAD_BYTES - 8)
    ids = [f"m{i:08d}" for i in range(rows)]
    stamps = [first + i % 86_400_000 for i in range(rows)]
    payloads = [f"{i:08d}{payload}" for i in range(rows)]
    parquet = folder / "rows.parquet"
    table = pa.table({"id": ids, "timestamp_ms": pa.array(stamps, pa.int64()), "payload": payloads})
    pq.write_table(table, parquet)
    jsonl = folder / "rows.jsonl"
    with jsonl.open("w") as out:
        for i, t, p in zip(ids, stamps, payloads, strict=True):
            out.write(json.dumps({"id": i, "timestamp_ms": t, "payload": p}) + "\n")
    return parquet, jsonl


async def _command(*args: str) -> tuple[float, str]:
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *dejaq_command(),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    out, err = await proc.communicate()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"dejaq {args[0]} failed: {err.decode()[-1500:]}")
    return seconds, out.decode()


def require() -> None:
    """``Unavailable`` without Java or the [spark] extra."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        raise Unavailable("java is not installed (Spark needs Java 17)")
    missing = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        raise Unavailable(
            f"{', '.join(missing)} not installed: pip install 'dejaq-timeline[spark]'"
        )


async def run(plan: Plan) -> dict[str, Any]:
    require()
    rows = rows_of(plan)
    with tempfile.TemporaryDirectory(prefix="dejaq-bench-spark-") as tmp:
        parquet, jsonl = await asyncio.to_thread(_inputs, Path(tmp), rows)
        async with broker("memory://") as b, Client(b.address) as client:
            admin = Admin(client)
            await admin.create_topic("spark")
            await admin.create_topic("produce")
            wall, out = await _command(
                "spark",
                "schedule",
                *("--input", str(parquet), "--topic", "spark", "--broker", b.address),
                *("--master", "local[2]"),
            )
            found = RATE.search(out)
            if found is None:
                raise RuntimeError(f"no rate in dejaq spark schedule's output: {out!r}")
            write_s = float(found.group(1))
            produce_s, _ = await _command(
                "produce", "produce", "--jsonl", str(jsonl), "--broker", b.address
            )
            stored = {
                t: (await admin.describe_topic(t)).counts.waiting for t in ("spark", "produce")
            }
    spark_rate = rows / write_s
    produce_rate = rows / produce_s
    result = {
        "rows": rows,
        "spark_write_s": round(write_s, 2),
        "spark_wall_s": round(wall, 2),  # with the JVM's start and the input's schema
        "spark_rows_s": round(spark_rate),
        "produce_jsonl_s": round(produce_s, 2),
        "produce_rows_s": round(produce_rate),
        "ratio": round(spark_rate / produce_rate, 2),
        "stored": stored,
        "lost": sum(rows - n for n in stored.values() if n < rows),
        "doubled": sum(n - rows for n in stored.values() if n > rows),
    }
    if not plan.smoke:
        result["target_rows_s_met"] = spark_rate >= TARGET_ROWS_S
        result["target_ratio_met"] = spark_rate >= TARGET_RATIO * produce_rate
    print(
        f"[spark] {rows:,} rows: data source {spark_rate:,.0f} rows/s (write {write_s:.1f} s,"
        f" {wall:.1f} s with Spark's start), dejaq produce --jsonl {produce_rate:,.0f} rows/s"
        f" ({produce_s:.1f} s): ratio {result['ratio']}",
        flush=True,
    )
    return result
