"""``dejaq spark schedule``: the write as a command, on its own local Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.broker_process import BrokerProcess
from tests.spark.conftest import create_topic
from tests.spark.support import now_ms, scan

TIMEOUT_S = 180
SCHEDULE = (sys.executable, "-m", "dejaq.driver.cli.main", "spark", "schedule")


def test_schedule_a_csv_file_with_ids_from_key_columns(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # given a CSV file of 1,000 reminders without ids
    topic = create_topic(broker.address, topic_name)
    at = now_ms() + 86_400_000
    lines = ["user,campaign,timestamp_ms,payload"]
    lines += [f"u{i},spring,{at + i},hello {i}" for i in range(1000)]
    (tmp_path / "in.csv").write_text("\n".join(lines) + "\n")

    def schedule() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                *SCHEDULE,
                *("--input", str(tmp_path / "in.csv"), "--topic", topic),
                *("--key-columns", "user,campaign", "--broker", broker.address),
                *("--master", "local[2]"),
            ],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        )

    # when it is scheduled (a re-run's duplicates are test_write's story: a JVM each)
    first = schedule()

    # then every row is, with an id derived from its keys
    assert first.returncode == 0, first.stderr[-2000:]
    assert "1000 rows: accepted 1000, duplicate 0, rejected 0" in first.stdout
    assert "rows/s" in first.stdout
    stored = scan(broker.address, topic)
    assert len(stored) == 1000 and all(id.startswith("k-") for id in stored)
    assert sorted(m.message.payload for m in stored.values())[:2] == [b"hello 0", b"hello 1"]


def test_schedule_refuses_a_missing_topic_with_one_line(
    broker: BrokerProcess, tmp_path: Path
) -> None:
    (tmp_path / "in.json").write_text('{"id": "a", "timestamp_ms": 1, "payload": "x"}\n')
    done = subprocess.run(
        [
            *SCHEDULE,
            *("--input", str(tmp_path / "in.json"), "--topic", "no-such-topic"),
            *("--broker", broker.address, "--master", "local[1]"),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 1
    assert "dejaq: error:" in done.stderr and "no-such-topic" in done.stderr
