"""What the Spark stories share: inputs written with pyarrow, and the topic
read back through the broker (not through Spark) to check what landed."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.servers import in_ci

# Without the [spark] extra the Spark stories are skipped locally (every
# module imports this one first), and fail under CI=true.
if not in_ci() and not all(importlib.util.find_spec(m) for m in ("pyspark", "pyarrow")):
    pytest.skip("pyspark or pyarrow is not installed", allow_module_level=True)

import pyarrow as pa
import pyarrow.parquet as pq

from dejaq.driver.admin import Admin, MessageInfo
from dejaq.driver.client import Client
from dejaq.driver.spark.summary import Totals


def now_ms() -> int:
    return int(time.time() * 1000)


def write_parquet(path: Path, rows: int, first_ms: int, files: int = 2) -> None:
    """``rows`` messages m0.. due at first_ms + i, payload p<i>, in ``files`` files."""
    path.mkdir(parents=True, exist_ok=True)
    per = rows // files
    for f in range(files):
        n = range(f * per, rows if f == files - 1 else (f + 1) * per)
        table = pa.table(
            {
                "id": [f"m{i}" for i in n],
                "timestamp_ms": pa.array([first_ms + i for i in n], pa.int64()),
                "payload": [f"p{i}" for i in n],
            }
        )
        pq.write_table(table, path / f"part-{f}.parquet")


def scan(address: str, topic: str) -> dict[str, MessageInfo]:
    """Every message of ``topic`` by id, read bucket by bucket from the broker."""

    async def read() -> dict[str, MessageInfo]:
        async with Client(address) as client:
            admin = Admin(client)
            buckets = (await admin.describe_topic(topic)).topic.settings.buckets
            out: dict[str, MessageInfo] = {}
            for bucket in range(buckets):
                after: str | None = ""
                while after is not None:
                    page = await admin.scan_bucket(topic, bucket, after, 10_000)
                    for info in page.messages:
                        assert info.message.id not in out, f"{info.message.id} came twice"
                        out[info.message.id] = info
                    after = page.after_id
            return out

    return asyncio.run(read())


def counts(address: str, topic: str) -> tuple[int, int, int, int]:
    async def describe() -> tuple[int, int, int, int]:
        async with Client(address) as client:
            c = (await Admin(client).describe_topic(topic)).counts
            return (c.waiting, c.due, c.leased, c.dead)

    return asyncio.run(describe())


def write(df: Any, summary: Path, **options: str) -> Totals:
    """``df`` written through format("dejaq"); the commit's totals."""
    w = df.write.format("dejaq").mode("append").option("summaryPath", str(summary))
    for key, value in options.items():
        w = w.option(key, value)
    w.save()
    return Totals.from_json(summary.read_text())


def rejects(folder: Path) -> list[dict[str, Any]]:
    lines = [
        line for f in sorted(folder.glob("part-*.json")) for line in f.read_text().splitlines()
    ]
    return [json.loads(line) for line in lines]


def reasons(found: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Each rejected row's reason by its ``case`` column."""
    return {r["row"]["case"]: r["reason"] for r in found}
