"""How long deleting a large topic holds up another topic's produce.

    python benchmarks/topic_delete.py                        # sqlite and postgres, 1M
    python benchmarks/topic_delete.py --backends sqlite --messages 200000

Per backend, a fresh ``dejaq broker`` process on a fresh store, topics "big"
(64 buckets) and "small". "big" is filled with ``--messages`` messages
straight into storage through the storage plugin (as the scan scenario
fills; not measured). A probe in this process then produces one message at a
time to "small" through ``Producer.send``, each answered before the next;
after ``--baseline-s`` of that, ``Admin.delete_topic("big")``. The probe runs
on until the big topic's rows are gone from the store (SQLite removes them
after the call, a chunk at a time; PostgreSQL within it) and ``--tail-s``
more. Figures: the delete call's time, when the rows were gone, and the
probe's produce times before and during the removal — the slowest of them is
the longest stall another topic saw.

Figures print as a table and go to benchmarks/results/topic_delete.json.
Timings on a shared machine are noisy: compare runs made side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from scenarios.scan import BUCKETS, fill_storage
from suite.backends import store
from suite.broker import broker

from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Producer

RESULTS = Path(__file__).parent / "results" / "topic_delete.json"
POLL_S = 0.2


def rows_left(url: str) -> bool:
    """Whether the big topic has a message stored still: one index seek (a
    count would hold a long read, and keep the WAL from being checkpointed)."""
    if url.startswith("sqlite:///"):
        path = url.removeprefix("sqlite:///")
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            query = "SELECT 1 FROM messages WHERE topic = 'big' LIMIT 1"
            return conn.execute(query).fetchone() is not None
    with psycopg.connect(url) as conn:
        query = "SELECT 1 FROM dejaq_messages WHERE topic = 'big' LIMIT 1"
        return conn.execute(query).fetchone() is not None


async def until_gone(url: str) -> None:
    while True:
        if not await asyncio.to_thread(rows_left, url):
            return
        await asyncio.sleep(POLL_S)


class Probe:
    """One produce at a time to "small": (when it started, how long it took) each."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.samples: list[tuple[float, float]] = []
        self.running = True

    async def run(self) -> None:
        while self.running:
            start = time.monotonic()
            await self.producer.send(b"probe")
            self.samples.append((start, time.monotonic() - start))

    def between(self, start: float, end: float) -> list[float]:
        """Times in ms of the produces running at some point in [start, end]."""
        return [took * 1000 for at, took in self.samples if at + took >= start and at <= end]


def summary(times: list[float]) -> dict[str, float | int]:
    if not times:
        return {"produces": 0}
    return {
        "produces": len(times),
        "p50_ms": round(statistics.median(times), 2),
        "max_ms": round(max(times), 1),
    }


async def one(name: str, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as workdir:
        async with store(name, workdir) as s, broker(s.url) as b, Client(b.address) as client:
            admin = Admin(client)
            await admin.create_topic("big", TopicSettings(buckets=BUCKETS))
            await admin.create_topic("small")
            t0 = time.monotonic()
            await fill_storage(s.url, "big", args.messages)
            fill_s = time.monotonic() - t0
            async with Producer(client, "small") as producer:
                probe = Probe(producer)
                task = asyncio.create_task(probe.run())
                await asyncio.sleep(args.baseline_s)
                start = time.monotonic()
                await admin.delete_topic("big")
                returned = time.monotonic()
                await until_gone(s.url)
                gone = time.monotonic()
                await asyncio.sleep(args.tail_s)
                probe.running = False
                await task
            return {
                "messages": args.messages,
                "fill_s": round(fill_s, 1),
                "delete_call_ms": round((returned - start) * 1000, 1),
                "rows_gone_s": round(gone - start, 2),
                "before": summary(probe.between(start - args.baseline_s, start)),
                "during": summary(probe.between(start, gone)),
            }


async def bounded(name: str, args: argparse.Namespace) -> dict[str, Any]:
    # The fill at 5k msgs/s at least, the removal at 2k/s at least.
    bound = 120 + args.messages / 5_000 + args.messages / 2_000
    return await asyncio.wait_for(one(name, args), bound)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--baseline-s", type=float, default=2.0)
    p.add_argument("--tail-s", type=float, default=1.0)
    args = p.parse_args()
    results: dict[str, Any] = {}
    for name in args.backends.split(","):
        results[name] = r = asyncio.run(bounded(name, args))
        print(
            f"{name:9} {r['messages']:>9,} msgs  delete call {r['delete_call_ms']:>8} ms"
            f"  rows gone {r['rows_gone_s']:>6} s  produce before {r['before']}"
            f"  during {r['during']}",
            flush=True,
        )
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"saved to {RESULTS}")


if __name__ == "__main__":
    main()
