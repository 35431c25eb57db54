"""The rejects output: each refused row with its reason, as JSON lines.

A task attempt writes its own file under ``<rejectsPath>/_attempts/``; the
job's commit moves the files of the attempts Spark kept to
``<rejectsPath>/part-<partition>.json`` and drops the rest, so a failed and
retried task never reports its rows twice. ``spark.read.json(rejectsPath)``
reads them back (the ``_attempts`` folder is hidden from it). The path must be
one every executor and the driver see (local on ``local[*]``, a shared mount
on a cluster).
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from dejaq.driver.spark.rows import Refusal

ATTEMPTS = "_attempts"
MAX_VALUE_CHARS = 1024  # longer values (a payload too big) are cut, with their size


def _plain(value: Any) -> Any:
    """A row value as JSON can hold it."""
    if isinstance(value, bytes):
        try:
            value = value.decode()
        except UnicodeDecodeError:
            return {
                "base64": base64.b64encode(value[:MAX_VALUE_CHARS]).decode(),
                "bytes": len(value),
            }
    if isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
        return value[:MAX_VALUE_CHARS] + f"... ({len(value)} characters)"
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


class RejectsFile:
    """One task attempt's rejects; nothing is created until a row is refused."""

    def __init__(self, root: str | None, partition: int, attempt: int) -> None:
        self.root = root
        self.path = (
            None
            if root is None
            else os.path.join(root, ATTEMPTS, f"part-{partition:05d}-attempt-{attempt}.json")
        )
        self._out: IO[str] | None = None

    def add(self, batch: pa.RecordBatch, refusals: Iterable[Refusal]) -> None:
        if self.path is None:
            return
        if self._out is None:
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._out = open(self.path, "w", encoding="utf-8")
        for r in refusals:
            row = batch.slice(r.row, 1).to_pylist()[0]
            line = {"reason": r.reason, "id": r.id, "topic": r.topic, "row": _plain(row)}
            self._out.write(json.dumps(line, ensure_ascii=False) + "\n")

    def close(self) -> str | None:
        """The file written, or None when no row was refused."""
        if self._out is None:
            return None
        self._out.close()
        return self.path


def promote(root: str, kept: Iterable[tuple[int, str]]) -> list[str]:
    """Move the kept attempts' files (partition, file) into place; drop the rest."""
    done = []
    for partition, file in kept:
        target = os.path.join(root, f"part-{partition:05d}.json")
        os.replace(file, target)
        done.append(target)
    shutil.rmtree(os.path.join(root, ATTEMPTS), ignore_errors=True)
    return done
