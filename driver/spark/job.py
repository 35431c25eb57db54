"""``dejaq spark schedule``: the data source's write, as a job for people who do
not write Spark code. Reads a Parquet, CSV or JSON input, writes it through
``format("dejaq")`` on ``local[*]`` (or ``--master``), shows the write's
progress and prints the commit's totals."""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import col, to_json, trim
from pyspark.sql.types import StringType, StructType

from dejaq.core.errors import InvalidArgument
from dejaq.driver.spark import register
from dejaq.driver.spark.summary import Totals

FORMATS = ("parquet", "csv", "json")
PROGRESS_EVERY_S = 1.0
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Job:
    input: str
    options: Mapping[str, str]  # the data source's options (broker, topic, ...)
    format: str | None = None  # None: from the input's extension
    master: str = "local[*]"
    spark_ui: bool = False  # Spark's web UI (the job prints its own progress)


def spark_conf(job: Job) -> dict[str, str]:
    """The Spark settings of the job's session. A local master stays on loopback:
    nothing of it is reachable from the network."""
    conf = {
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "true" if job.spark_ui else "false",
    }
    if is_local(job.master):
        conf["spark.driver.host"] = LOOPBACK
        conf["spark.driver.bindAddress"] = LOOPBACK
    return conf


def is_local(master: str) -> bool:
    """``local``, ``local[N]``, ``local[N,F]``, ``local-cluster[...]``: on this machine."""
    return master.strip().startswith("local")


def session(job: Job) -> SparkSession:
    """The job's Spark session (Spark's own log at ERROR, the data source registered)."""
    # Spark's Python workers must run this interpreter, where dejaq is installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if is_local(job.master):
        # What Spark binds beside the driver (its web UI when asked) follows this.
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    builder = SparkSession.builder.master(job.master).appName("dejaq spark schedule")
    for key, value in spark_conf(job).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def input_format(path: str, given: str | None) -> str:
    if given:
        if given not in FORMATS:
            raise InvalidArgument(f"--format is one of {', '.join(FORMATS)}, not {given!r}")
        return given
    p = Path(path)
    names = [p.name] if p.is_file() else [f.name for f in p.glob("*") if f.is_file()]
    for fmt, endings in (
        ("parquet", (".parquet",)),
        ("csv", (".csv",)),
        ("json", (".json", ".jsonl")),
    ):
        if any(n.endswith(endings) for n in names):
            return fmt
    raise InvalidArgument(f"cannot tell the format of {path!r}: give --format parquet|csv|json")


def read_input(
    spark: SparkSession, path: str, fmt: str, options: Mapping[str, str] | None = None
) -> DataFrame:
    if not Path(path).exists() and "://" not in path:
        raise InvalidArgument(f"input {path!r} does not exist")
    reader = spark.read
    if fmt == "csv":
        # RFC 4180 quoting, as Python's csv, pandas and spreadsheets write it: a
        # quote inside a quoted cell is doubled (Spark's default escape is a backslash).
        reader = reader.option("header", "true").option("inferSchema", "true")
        reader = reader.option("escape", '"')
        return keys_as_text(typed_csv(reader.format(fmt).load(path), options or {}), options or {})
    return keys_as_text(reader.format(fmt).load(path), options or {})


def keys_as_text(df: DataFrame, options: Mapping[str, str]) -> DataFrame:
    """A key column as text (CSV and JSON infer a number from "42"), and the
    headers of a JSON input, an object Spark reads as a struct, as JSON text,
    which the data source reads as it reads a CSV's."""
    key = options.get("messageKeyColumn") or "key"
    if key in df.columns and not isinstance(df.schema[key].dataType, StringType):
        df = df.withColumn(key, col(key).cast("string"))
    headers = options.get("headersColumn") or "headers"
    if headers in df.columns and isinstance(df.schema[headers].dataType, StructType):
        df = df.withColumn(headers, to_json(col(headers)))
    return df


def typed_csv(df: DataFrame, options: Mapping[str, str]) -> DataFrame:
    """A CSV's number columns as numbers. CSV has no types: Spark infers one per
    column, and a single value that is not a number (a blank, a stray word, a
    space before the digits) makes the whole column text, which the data source
    refuses. Cast here, such a value is null, and only its row is refused."""
    numbers = {
        options.get("timeColumn") or "timestamp_ms": "long",
        options.get("maxDeliveriesColumn") or "max_deliveries": "long",
        options.get("expiresAtColumn") or "expires_at_ms": "long",
    }
    if "timeColumn" not in options and "timestamp_ms" not in df.columns:
        numbers["timestamp"] = "timestamp"  # ISO 8601 text
    for name, kind in numbers.items():
        if name in df.columns and isinstance(df.schema[name].dataType, StringType):
            df = df.withColumn(name, trim(col(name)).try_cast(kind))
    return df


class Progress:
    """Prints the write stage's finished / total tasks to ``out`` while it runs."""

    def __init__(self, spark: SparkSession, out: TextIO) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.out = out
        self.start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Progress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        last = ""
        while not self._stop.wait(PROGRESS_EVERY_S):
            done = total = 0
            for stage in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(stage)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total:
                line = f"dejaq: writing, {done}/{total} tasks done"
                if line != last:
                    elapsed = time.monotonic() - self.start
                    print(f"{line} ({elapsed:.0f} s)", file=self.out, flush=True)
                    last = line


def run(job: Job, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> Totals:
    """Run the write; its totals (also printed to ``out``)."""
    fmt = input_format(job.input, job.format)
    spark = session(job)
    with tempfile.TemporaryDirectory(prefix="dejaq-spark-") as tmp:
        summary = os.path.join(tmp, "summary.json")
        df = read_input(spark, job.input, fmt, job.options)
        writer = df.write.format("dejaq").mode("append").option("summaryPath", summary)
        for key, value in job.options.items():
            writer = writer.option(key, value)
        start = time.monotonic()
        with Progress(spark, err):
            writer.save()
        seconds = time.monotonic() - start
        totals = Totals.from_json(Path(summary).read_text())
    rate = totals.rows / seconds if seconds > 0 else 0.0
    # The commit printed nothing (summaryPath given): this is the one totals line.
    print(f"{totals.line()} in {seconds:.1f} s ({rate:,.0f} rows/s)", file=out)
    if totals.rejects:
        print(f"rejected rows with their reasons: {', '.join(totals.rejects)}", file=out)
    return totals
