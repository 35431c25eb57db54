"""What each task reports to the job's commit, and the totals the commit prints."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from pyspark.sql.datasource import WriterCommitMessage

from dejaq.core.errors import DejaqError

MAX_SAMPLES = 5  # refusal reasons a task reports (all of them go to the rejects output)


class TooManyRejects(DejaqError):
    """More rows were refused than the ``maxRejects`` option allows."""


@dataclass
class TaskReport(WriterCommitMessage):  # type: ignore[misc]
    """One task's counts (a Spark commit message)."""

    partition: int
    attempt: int
    rows: int = 0
    accepted: int = 0
    duplicate: int = 0
    rejected: int = 0
    # With onDuplicate replace or extend: waiting messages changed, or left leased.
    replaced: int = 0
    extended: int = 0
    leased: int = 0
    seconds: float = 0.0
    rejects_file: str | None = None
    samples: list[str] = field(default_factory=list)

    def sample(self, reason: str) -> None:
        if len(self.samples) < MAX_SAMPLES and reason not in self.samples:
            self.samples.append(reason)


@dataclass
class Totals:
    """The job's counts: the sum of the tasks Spark kept."""

    tasks: int = 0
    rows: int = 0
    accepted: int = 0
    duplicate: int = 0
    rejected: int = 0
    replaced: int = 0
    extended: int = 0
    leased: int = 0
    task_seconds: float = 0.0
    samples: list[str] = field(default_factory=list)
    rejects: list[str] = field(default_factory=list)  # the rejects files, once in place

    @classmethod
    def of(cls, reports: Iterable[object]) -> Totals:
        t = cls()
        for r in reports:
            if not isinstance(r, TaskReport):
                continue  # a task that failed has no report
            t.tasks += 1
            t.rows += r.rows
            t.accepted += r.accepted
            t.duplicate += r.duplicate
            t.rejected += r.rejected
            t.replaced += r.replaced
            t.extended += r.extended
            t.leased += r.leased
            t.task_seconds += r.seconds
            t.samples += [s for s in r.samples if s not in t.samples][
                : MAX_SAMPLES - len(t.samples)
            ]
        return t

    def line(self) -> str:
        text = (
            f"dejaq: {self.rows} rows: accepted {self.accepted}, duplicate {self.duplicate},"
            f" rejected {self.rejected}"
        )
        for name in ("replaced", "extended", "leased"):
            if getattr(self, name):
                text += f", {name} {getattr(self, name)}"
        if self.samples:
            text += " (" + "; ".join(self.samples) + ")"
        return text

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Totals:
        return cls(**json.loads(text))
