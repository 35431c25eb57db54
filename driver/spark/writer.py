"""The Spark writer: each task streams its partition (``send``); the job's
commit adds up the tasks' counts, puts the rejects in place and prints totals."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from dejaq.driver.client import Client
from dejaq.driver.spark.columns import Columns
from dejaq.driver.spark.options import WriteOptions
from dejaq.driver.spark.rejects import RejectsFile, promote
from dejaq.driver.spark.send import Sender
from dejaq.driver.spark.summary import TaskReport, TooManyRejects, Totals


class DejaqWriter(DataSourceArrowWriter):  # type: ignore[misc]
    def __init__(self, options: WriteOptions, columns: Columns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskReport:
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx else 0
        attempt = ctx.taskAttemptId() if ctx else 0
        report = TaskReport(partition, attempt)
        rejects = RejectsFile(self.options.rejects_path, partition, attempt)
        start = time.monotonic()

        async def run() -> None:
            async with Client(self.options.broker) as client:
                await Sender(client, self.options, self.columns, report, rejects).run(iterator)

        try:
            asyncio.run(run())
        finally:
            report.rejects_file = rejects.close()
        report.seconds = time.monotonic() - start
        return report

    def commit(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        totals = self._finish(messages)
        limit = self.options.max_rejects
        if limit is not None and totals.rejected > limit:
            raise TooManyRejects(f"{totals.line()}: over maxRejects={limit}")

    def abort(self, messages: Sequence[WriterCommitMessage | None]) -> None:
        # What the tasks that finished scheduled stays scheduled (produce cannot
        # be undone, and a re-run finds it as duplicates); their rejects are kept.
        self._finish(messages, failed=True)

    def _finish(
        self, messages: Sequence[WriterCommitMessage | None], failed: bool = False
    ) -> Totals:
        totals = Totals.of(messages)
        root = self.options.rejects_path
        if root is not None:
            kept = [
                (r.partition, r.rejects_file)
                for r in messages
                if isinstance(r, TaskReport) and r.rejects_file
            ]
            totals.rejects = promote(root, kept)
        if self.options.summary_path:
            Path(self.options.summary_path).write_text(totals.to_json())
        if self.options.summary_path and not failed:
            return totals  # the caller (dejaq spark schedule) prints them, with its timing
        suffix = " (the job failed)" if failed else ""
        where = f"; rejects in {root}" if root and totals.rejected else ""
        print(f"{totals.line()}{where}{suffix}", file=sys.stderr, flush=True)
        return totals
