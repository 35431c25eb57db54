"""The CPU a delivered message of each process of the load, over a step's steady part.

A step's first moments are its ramp-up (fresh consumers, the broker's first
leases on a new topic, the producer's first frames) and its last ones a drain,
so the window is the middle of the step: ``trim`` of the span from the first
due time to the last cut off each end (the middle half by default). Each
process's CPU seconds (utime + stime, ``/proc/PID/stat``) are read at the
window's start and end; the messages are the deliveries the consumers took
inside it (their own clocks); µs a delivered message = CPU seconds x 1e6 /
messages.

No imports from the suite: the arithmetic is tested on its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

TRIM = 0.25  # cut off each end of a step: its middle half is measured
PRODUCER, BROKER, STORAGE, CONSUMER = "producer", "broker", "storage", "consumer-"
Reader = Callable[[], float]  # CPU seconds of one process (or server) so far


def steady_window(
    first_due_ms: float, last_due_ms: float, trim: float = TRIM
) -> tuple[float, float]:
    """The steady part of a step whose messages fall due from ``first_due_ms``
    to ``last_due_ms``: ``trim`` of the span cut off each end."""
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), not {trim}")
    if last_due_ms <= first_due_ms:
        raise ValueError(f"an empty step: {first_due_ms} to {last_due_ms} ms")
    cut = (last_due_ms - first_due_ms) * trim
    return first_due_ms + cut, last_due_ms - cut


def delivered_within(received_ns: npt.ArrayLike, start_ms: float, end_ms: float) -> int:
    """Deliveries taken from ``start_ms`` (included) to ``end_ms`` (excluded)."""
    at_ms = np.asarray(received_ns, dtype=np.int64) / 1e6
    return int(np.count_nonzero((at_ms >= start_ms) & (at_ms < end_ms)))


def us_per_message(
    before: Mapping[str, float], after: Mapping[str, float], messages: int
) -> dict[str, float | None]:
    """Each process's CPU µs a message between two readings (None: no messages)."""
    return {
        name: (after[name] - before[name]) * 1e6 / messages if messages else None for name in before
    }


def by_role(per_process: Mapping[str, float | None]) -> dict[str, Any]:
    """Producer, broker, the consumers together and each, the storage server and
    the sum (a role the load has not, such as the rival's broker, is None)."""
    each = [
        v for k, v in sorted(per_process.items(), key=_consumer_order) if k.startswith(CONSUMER)
    ]
    known = [v for v in per_process.values() if v is not None]
    consumers = None if not each or None in each else sum(v for v in each if v is not None)
    whole = None if len(known) < len(per_process) or not known else sum(known)

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 2)

    return {
        PRODUCER: rounded(per_process.get(PRODUCER)),
        BROKER: rounded(per_process.get(BROKER)),
        "consumers": rounded(consumers),
        "each_consumer": [rounded(v) for v in each],
        STORAGE: rounded(per_process.get(STORAGE)),
        "sum": rounded(whole),
    }


def _consumer_order(item: tuple[str, Any]) -> tuple[int, str]:
    name = item[0]
    tail = name.removeprefix(CONSUMER)
    return (int(tail), "") if name.startswith(CONSUMER) and tail.isdigit() else (-1, name)


async def _until(at_ms: float) -> None:
    delay = (at_ms - time.time_ns() / 1e6) / 1000
    if delay > 0:
        await asyncio.sleep(delay)


@dataclass
class Meter:
    """Reads every process's CPU at a step's steady window (``watch``, run beside
    the step), then turns the deliveries into µs a message (``figures``)."""

    readers: dict[str, Reader]
    trim: float = TRIM
    marks: list[tuple[float, dict[str, float]]] = field(default_factory=list)

    def read(self) -> tuple[float, dict[str, float]]:
        """Wall clock ms (the middle of the reading: a process tree takes a
        while to walk) and every process's CPU seconds."""
        started = time.time_ns()
        cpu = {name: read() for name, read in self.readers.items()}
        return (started + time.time_ns()) / 2e6, cpu

    async def watch(self, first_due_ms: float, last_due_ms: float) -> None:
        self.marks = []
        for at_ms in steady_window(first_due_ms, last_due_ms, self.trim):
            await _until(at_ms)
            self.marks.append(self.read())

    def figures(self, received_ns: npt.ArrayLike) -> dict[str, Any]:
        if len(self.marks) != 2:
            return {"error": "the steady window was not read"}
        (start_ms, before), (end_ms, after) = self.marks
        return window_figures(start_ms, end_ms, before, after, received_ns)


def window_figures(
    start_ms: float,
    end_ms: float,
    before: Mapping[str, float],
    after: Mapping[str, float],
    received_ns: npt.ArrayLike,
) -> dict[str, Any]:
    seconds = (end_ms - start_ms) / 1000
    messages = delivered_within(received_ns, start_ms, end_ms)
    return {
        "from_ms": round(start_ms, 1),
        "to_ms": round(end_ms, 1),
        "seconds": round(seconds, 3),
        "delivered": messages,
        "delivered_per_s": round(messages / seconds) if seconds > 0 else 0,
        "cpu_s": {name: round(after[name] - before[name], 3) for name in before},
        "us_per_message": by_role(us_per_message(before, after, messages)),
    }


# -- the table -------------------------------------------------------------------

RIVAL_ROW = "redis poller (rival)"
HEADER = [
    "",
    "asked/s",
    "delivered/s",
    "kept up",
    "producer",
    "broker",
    "consumers",
    "each consumer",
    "storage",
    "sum",
    "ratio",
]


def title(rate: int, seconds: float) -> str:
    return (
        f"cpu: CPU µs a delivered message of each process (utime + stime from /proc),"
        f" over the middle half of a {seconds:g} s step at {rate:,}/s; storage = the"
        " storage server's processes (redis-server, every node of a Redis Cluster;"
        " PostgreSQL's postmaster and backends);"
        " ratio = sum / the Redis poller's sum; kept up = delivered in the window at >= 95%"
        " of the rate (else the producer's CPU is spread over fewer deliveries than it made)"
    )


def rows(
    found: Sequence[tuple[str, Mapping[str, Any]]], rival: Mapping[str, Any] | None
) -> list[list[Any]]:
    """A row per cpu result with figures (a backend's name and result), the
    rival's last; ratio = a row's sum / the rival's."""
    named = [*found, *([(RIVAL_ROW, rival)] if rival is not None else [])]
    rival_sum = ((rival or {}).get("us_per_message") or {}).get("sum")
    out = []
    for name, r in named:
        us = r.get("us_per_message")
        if not isinstance(us, dict):
            continue
        ratio = round(us["sum"] / rival_sum, 2) if us.get("sum") and rival_sum else None
        each = "/".join("-" if v is None else f"{v:.1f}" for v in us.get("each_consumer", []))
        out.append(
            [
                name,
                r.get("rate"),
                r.get("delivered_per_s"),
                r.get("kept_up"),
                us.get(PRODUCER),
                us.get(BROKER),
                us.get("consumers"),
                each or "-",
                us.get(STORAGE),
                us.get("sum"),
                ratio,
            ]
        )
    return out
