"""``dejaq spark schedule``: the write as a command, on its own local Spark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dejaq.driver.cli.spark_cmd import _first_line
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


def test_a_csv_time_column_with_a_stray_value_refuses_only_its_row(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # Given a CSV as the Spark page shows it, one time a word, one in seconds,
    # one with a space before its digits (each would make Spark read the column as text)
    topic = create_topic(broker.address, topic_name)
    at = now_ms() + 86_400_000
    lines = ["topic,user_id,campaign,timestamp_ms,payload"]
    lines += [f"{topic},{i},spring,{at + i},hello {i}" for i in range(3)]
    lines += [f"{topic},7,spring,soon,hello", f"{topic},8,spring,{at // 1000},hello"]
    lines += [f"{topic},9,spring, {at},hello"]
    (tmp_path / "sends.csv").write_text("\n".join(lines) + "\n")
    # When it is scheduled as the page does
    done = subprocess.run(
        [
            *SCHEDULE,
            *("--input", str(tmp_path / "sends.csv"), "--format", "csv"),
            *("--topic-column", "topic", "--key-columns", "user_id,campaign"),
            *("--broker", broker.address, "--master", "local[1]"),
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    # Then the good rows are scheduled, the word and the seconds refused, and
    # the totals said once
    assert done.returncode == 0, done.stderr[-2000:]
    totals = "dejaq: 6 rows: accepted 4, duplicate 0, rejected 2"
    assert (done.stdout + done.stderr).count(totals) == 1, (done.stdout, done.stderr)
    assert len(scan(broker.address, topic)) == 4


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


# Builds the sessions `dejaq spark schedule` builds from each set of flags, in a
# process of its own (this one's session would be reused), one after the other
# (the JVM starts once: ~8 s each), and prints each one's settings.
SESSIONS_OF = """
import json, sys
from dejaq.driver.cli.main import build_parser
from dejaq.driver.cli.spark_cmd import job_of
from dejaq.driver.spark.job import session

for flags in json.loads(sys.argv[1]):
    argv = ["spark", "schedule", "--input", "in.csv", "--topic", "t", *flags]
    spark = session(job_of(build_parser().parse_args(argv)))
    conf = spark.sparkContext.getConf()
    keys = ("spark.driver.host", "spark.driver.bindAddress", "spark.ui.enabled")
    print(json.dumps({**{k: conf.get(k) for k in keys}, "ui": spark.sparkContext.uiWebUrl}))
    spark.stop()
"""
# The web UI's first: the JVM starts as that session asks (SPARK_LOCAL_IP
# included); the other's settings are its own session's.
WITH_UI = ("--master", "local[1]", "--spark-ui")
WITHOUT_UI = ("--master", "local[1]")


@pytest.fixture(scope="module")
def session_settings() -> dict[tuple[str, ...], dict[str, Any]]:
    """Each set of flags' session settings."""
    flag_sets = [WITH_UI, WITHOUT_UI]
    env = {k: v for k, v in os.environ.items() if k != "SPARK_LOCAL_IP"}
    done = subprocess.run(
        [sys.executable, "-c", SESSIONS_OF, json.dumps(flag_sets)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**env, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()[-len(flag_sets) :]
    return {flags: json.loads(line) for flags, line in zip(flag_sets, lines, strict=True)}


def test_a_local_master_stays_on_loopback_with_no_web_ui(
    session_settings: dict[tuple[str, ...], dict[str, Any]],
) -> None:
    # given the command's flags with the default local master
    # when the command builds its Spark session
    settings = session_settings[WITHOUT_UI]

    # then Spark binds to loopback only and starts no web UI
    assert settings == {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "ui": None,
    }


def test_the_web_ui_starts_when_asked_and_on_loopback(
    session_settings: dict[tuple[str, ...], dict[str, Any]],
) -> None:
    settings = session_settings[WITH_UI]
    assert settings["spark.ui.enabled"] == "true"
    assert settings["spark.driver.bindAddress"] == "127.0.0.1"
    assert settings["ui"].startswith("http://127.0.0.1:"), settings["ui"]


def test_a_file_spark_cannot_read_in_the_format_given_is_told_by_its_cause(
    spark: Any, tmp_path: Path
) -> None:
    # Given a CSV file read as Parquet (what `spark schedule --format parquet` does)
    path = tmp_path / "in.csv"
    path.write_text("id,timestamp_ms,payload\na,1,x\n")
    with pytest.raises(Exception) as failed:
        spark.read.format("parquet").load(str(path)).collect()
    # When the CLI tells the failure, then it is the root cause Spark found,
    # not Py4J's "An error occurred while calling o41.load."
    told = _first_line(failed.value)
    assert "is not a Parquet file" in told, str(failed.value)[:2000]
    assert "\n" not in told
