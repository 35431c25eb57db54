"""A message's key and headers through the data source: written from a ``key``
column and a ``headers`` map (or, from a CSV or JSON, a JSON object), read back
by spark.read.format("dejaq"), and a bad one refusing only its row."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.e2e.broker_process import BrokerProcess
from tests.spark.conftest import create_topic
from tests.spark.support import now_ms, reasons, rejects, scan, write

SCHEMA = (
    "case string, id string, timestamp_ms long, payload string,"
    " key string, headers map<string,string>"
)
SCHEDULE = (sys.executable, "-m", "dejaq.driver.cli.main", "spark", "schedule")
TIMEOUT_S = 180


def test_keys_and_headers_are_written_and_read_back_and_bad_ones_refuse_their_row(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # Given keyed rows with headers, plain rows, and rows with a bad key or headers
    topic = create_topic(broker.address, topic_name, buckets=4)
    at = now_ms() + 3_600_000
    rows = [
        (
            f"good {i}",
            f"g{i}",
            at + i,
            f"p{i}",
            f"tenant-{i % 3}",
            {"X-Seq": str(i), "Lang": "d\u00e9"},
        )
        for i in range(30)
    ]
    rows += [(f"plain {i}", f"n{i}", at + i, "p", None, None) for i in range(5)]
    rows += [
        ("key with a control character", "b1", at, "p", "a\tb", None),
        ("key too long", "b2", at, "p", "k" * 300, None),
        ("header name not a token", "b3", at, "p", None, {"bad name": "v"}),
        ("header value null", "b4", at, "p", None, {"X-A": None}),
        ("header twice", "b5", at, "p", None, {"X-A": "1", "x-a": "2"}),
    ]
    df = spark.createDataFrame(rows, SCHEMA)

    # When the DataFrame is written with a rejects path
    out = tmp_path / "rejects"
    totals = write(
        df, tmp_path / "s.json", broker=broker.address, topic=topic, rejectsPath=str(out)
    )

    # Then the good rows landed with their key and headers, the plain ones with none
    assert (totals.rows, totals.accepted, totals.rejected) == (40, 35, 5)
    stored = scan(broker.address, topic)
    assert set(stored) == {f"g{i}" for i in range(30)} | {f"n{i}" for i in range(5)}
    assert (stored["g4"].message.key, stored["g4"].headers) == (
        "tenant-1",
        {"X-Seq": "4", "Lang": "d\u00e9"},
    )
    assert (stored["n0"].message.key, stored["n0"].headers) == ("", {})
    # And each bad row is refused alone, with its reason
    why = reasons(rejects(out))
    assert set(why) == {r[0] for r in rows[-5:]}
    assert "control characters" in why["key with a control character"]
    assert "at most 256 bytes" in why["key too long"]
    assert "not an HTTP token" in why["header name not a token"]
    assert "'X-A' is null" in why["header value null"]
    assert "given twice" in why["header twice"]
    assert all(r.startswith(("key (key)", "headers (headers)")) for r in why.values())

    # When the topic is read back
    read = spark.read.format("dejaq").option("broker", broker.address).option("topic", topic).load()
    found = {r["id"]: r for r in read.select("id", "key", "headers").collect()}
    # Then each message has its key and headers, and null for none
    assert found["g7"]["key"] == "tenant-1"
    assert found["g7"]["headers"] == {"X-Seq": "7", "Lang": "d\u00e9"}
    assert (found["n3"]["key"], found["n3"]["headers"]) == (None, None)
    assert read.filter("key = 'tenant-0'").count() == 10


def _schedule(
    path: Path, topic: str, broker: BrokerProcess, *more: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *SCHEDULE,
            *("--input", str(path), "--topic", topic, "--broker", broker.address),
            *("--master", "local[2]"),
            *more,
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )


def test_schedule_reads_keys_and_headers_from_a_csv_s_json_objects(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # Given a CSV whose headers column holds JSON objects, a number-like key, and a bad object
    topic = create_topic(broker.address, topic_name)
    at = now_ms() + 86_400_000
    lines = [
        "id,timestamp_ms,payload,key,headers",
        f'c1,{at},hello,42,"{{""Content-Type"": ""text/plain"", ""X-Region"": ""z\u00fcrich""}}"',
        f"c2,{at + 1},plain,,",
        f'c3,{at + 2},bad,7,"{{""X-A"": 1}}"',
        f'c4,{at + 3},bad,7,"not json"',
    ]
    (tmp_path / "in.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")

    # When it is scheduled
    done = _schedule(tmp_path / "in.csv", topic, broker, "--rejects", str(tmp_path / "rejects"))

    # Then the good rows carry their key and headers, and each bad one is refused with its reason
    assert done.returncode == 0, done.stderr[-2000:]
    assert "4 rows: accepted 2, duplicate 0, rejected 2" in done.stdout
    stored = scan(broker.address, topic)
    assert (stored["c1"].message.key, stored["c1"].headers) == (
        "42",
        {"Content-Type": "text/plain", "X-Region": "z\u00fcrich"},
    )
    assert (stored["c2"].message.key, stored["c2"].headers) == ("", {})
    why = {r["id"]: r["reason"] for r in rejects(tmp_path / "rejects")}
    assert why == {
        "c3": "headers (headers): header 'X-A' is not a string",
        "c4": why["c4"],
    }
    assert why["c4"].startswith("headers (headers): not a JSON object of strings")


def test_schedule_reads_headers_from_a_json_input_s_objects(
    spark: Any, broker: BrokerProcess, topic_name: str, tmp_path: Path
) -> None:
    # Given JSON lines whose headers are objects of differing names
    topic = create_topic(broker.address, topic_name)
    at = now_ms() + 86_400_000
    docs = [
        {"id": "j1", "timestamp_ms": at, "payload": "a", "key": "acme", "headers": {"X-A": "1"}},
        {"id": "j2", "timestamp_ms": at, "payload": "b", "key": "beta", "headers": {"X-B": "2"}},
        {"id": "j3", "timestamp_ms": at, "payload": "c"},
    ]
    (tmp_path / "in.json").write_text("\n".join(json.dumps(d) for d in docs) + "\n")

    # When it is scheduled
    done = _schedule(tmp_path / "in.json", topic, broker)

    # Then each message has exactly its own headers and key
    assert done.returncode == 0, done.stderr[-2000:]
    stored = scan(broker.address, topic)
    assert [(stored[i].message.key, stored[i].headers) for i in ("j1", "j2", "j3")] == [
        ("acme", {"X-A": "1"}),
        ("beta", {"X-B": "2"}),
        ("", {}),
    ]
