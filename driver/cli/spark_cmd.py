"""``dejaq spark schedule``: bulk-schedule a Parquet, CSV or JSON file with Spark."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
from typing import TYPE_CHECKING, Any

from dejaq.core.errors import DejaqError, InvalidArgument
from dejaq.driver.admin import Admin
from dejaq.driver.cli.common import add_broker, connect
from dejaq.driver.cli.numbers import INT64, whole
from dejaq.driver.client import parse_brokers

if TYPE_CHECKING:  # pyspark is imported only when a job runs
    from dejaq.driver.spark.job import Job

# The security flags reach Spark's Python workers as the variables the driver
# reads (a local master's workers inherit this process's environment).
SECURITY_FLAGS = {
    "tls_ca": "DEJAQ_TLS_CA",
    "tls_cert": "DEJAQ_TLS_CERT",
    "tls_key": "DEJAQ_TLS_KEY",
    "token": "DEJAQ_TOKEN",
}

_RAISED = re.compile(
    r"dejaq\.\S*\.(?:[A-Za-z]+Error|InvalidArgument|NotFound|TooManyRejects"
    r"|PermissionDenied|Unauthenticated): (.+)"
)
_PY4J_CALL = re.compile(r"An error occurred while calling \S+\.$")
# A Java exception's line in the trace Py4J passes on: "Caused by: CLASS: MESSAGE",
# or the first, ": CLASS: MESSAGE".
_JAVA_CAUSE = re.compile(r"^(?:Caused by)?: [\w.$]+(?:Exception|Error): (.+)$", re.MULTILINE)
# flag -> the data source option it sets
COLUMN_FLAGS = {
    "id_column": "idColumn",
    "time_column": "timeColumn",
    "payload_column": "payloadColumn",
    "key_columns": "keyColumns",
    "topic_column": "topicColumn",
    "max_deliveries_column": "maxDeliveriesColumn",
    "expires_at_column": "expiresAtColumn",
    "message_key_column": "messageKeyColumn",
    "headers_column": "headersColumn",
    "rejects": "rejectsPath",
    "max_rejects": "maxRejects",
    "batch_size": "batchSize",
    "on_duplicate": "onDuplicate",
}


def register(sub: Any) -> None:
    p = sub.add_parser("spark", help="bulk scheduling with Spark")
    spark_sub = p.add_subparsers(dest="spark_command", required=True, metavar="COMMAND")
    s = spark_sub.add_parser(
        "schedule",
        help="schedule every row of a Parquet, CSV or JSON input",
        description="Write every row of INPUT on a topic's timeline through the Spark data"
        " source 'dejaq' (needs pip install 'dejaq-timeline[spark]' and Java 17). Columns:"
        " id (or --key-columns to derive it), timestamp_ms or timestamp, payload; optional"
        " key and headers (a map, or in a CSV a JSON object).",
    )
    s.add_argument("--input", required=True, help="a file or folder of files")
    s.add_argument("--format", choices=["parquet", "csv", "json"], help="default: from the names")
    s.add_argument("--topic", help="the topic (or --topic-column)")
    s.add_argument("--topic-column", help="a column naming each row's topic")
    s.add_argument("--id-column", help="default: id")
    s.add_argument("--time-column", help="default: timestamp_ms, else timestamp")
    s.add_argument("--payload-column", help="default: payload")
    s.add_argument("--key-columns", help="columns a missing id is derived from (a,b,...)")
    s.add_argument("--max-deliveries-column", help="default: max_deliveries when present")
    s.add_argument("--expires-at-column", help="default: expires_at_ms when present")
    s.add_argument("--message-key-column", help="each message's key; default: key when present")
    s.add_argument(
        "--headers-column",
        help="each message's headers (a map, or a JSON object); default: headers when present",
    )
    s.add_argument(
        "--on-duplicate",
        metavar="keep|replace|extend",
        help="when a row's id is already waiting: keep it (default), replace it with the row,"
        " or extend it to the row's time",
    )
    s.add_argument("--rejects", metavar="PATH", help="write refused rows with reasons here")
    s.add_argument(
        "--max-rejects", type=whole(INT64), help="fail the job past this many refused rows"
    )
    s.add_argument(
        "--batch-size", type=whole(INT64, least=1), help="messages per Produce frame (default 5000)"
    )
    s.add_argument(
        "--master",
        default="local[*]",
        help="Spark master (default local[*]; a local one listens on 127.0.0.1 only)",
    )
    s.add_argument("--spark-ui", action="store_true", help="start Spark's web UI (default off)")
    add_broker(s)
    s.set_defaults(run=schedule)


def schedule(args: argparse.Namespace) -> int:
    spark_job = job_of(args)
    from dejaq.driver.spark import job  # job_of found it importable

    if args.topic:
        asyncio.run(_check_topic(args, args.topic))
    for flag, variable in SECURITY_FLAGS.items():
        if getattr(args, flag):
            os.environ[variable] = getattr(args, flag)
    try:
        job.run(spark_job)
    except DejaqError:
        raise
    except Exception as exc:  # Spark's own errors: their first line says what failed
        raise DejaqError(f"the Spark job failed: {_first_line(exc)}") from exc
    return 0


def job_of(args: argparse.Namespace) -> Job:
    """The Spark job the flags describe."""
    try:
        from dejaq.driver.spark import job
    except ImportError as exc:
        raise InvalidArgument(
            f"dejaq spark needs pyspark and pyarrow ({exc}): pip install 'dejaq-timeline[spark]'"
        ) from exc
    options = {"broker": ",".join(parse_brokers(args.broker))}
    if args.topic:
        options["topic"] = args.topic
    for flag, option in COLUMN_FLAGS.items():
        value = getattr(args, flag)
        if value is not None:
            options[option] = str(value)
    return job.Job(args.input, options, args.format, args.master, args.spark_ui)


def _first_line(exc: BaseException) -> str:
    """A dejaq error raised inside Spark (in a Python worker's traceback); for
    an error of the JVM that Py4J passes on ("An error occurred while calling
    o41.load."), the message of its root cause; else the first line of Spark's
    message."""
    text = str(exc).strip()
    found = _RAISED.findall(text)
    if found:
        return str(found[-1])
    first = text.splitlines()[0] if text else type(exc).__name__
    if _PY4J_CALL.match(first):
        causes = _JAVA_CAUSE.findall(text)
        if causes:
            return str(causes[-1]).strip()
    return first


async def _check_topic(args: argparse.Namespace, topic: str) -> None:
    """Fail before Spark starts (seconds) when the topic does not exist."""
    async with connect(args) as client:
        await Admin(client).describe_topic(topic)
