"""Produce rate with ``on_duplicate`` replace against keep, on memory and Redis.

    python benchmarks/debounce_produce.py                    # 20,000 messages a phase
    python benchmarks/debounce_produce.py --messages 50000 --backends memory

For each backend, one ``dejaq broker`` process; this process produces through
the driver (``Producer.send_batch``, batches of 1,000, due in an hour) in four
phases after an untimed warm-up on a topic of its own, each timed on the wall
clock:

- ``keep-new`` / ``replace-new``: ids the topic has not seen (every message
  ACCEPTED; with replace, the debounce path of storage judges each first);
- ``keep-again``: those ids once more, keeping (every one a DUPLICATE);
- ``replace-again``: those ids once more, replacing (every one REPLACED: its
  due time, payload and version change where it waits).

Figures print and go to benchmarks/results/debounce_produce.json (``--name``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from suite.backends import Store, redis_store
from suite.broker import broker
from suite.procstat import load_average
from suite.record import save_record

BATCH = 1000
PHASES = (
    ("keep-new", "keep", "new"),
    ("replace-new", "replace", "fresh"),
    ("keep-again", "keep", "new"),
    ("replace-again", "replace", "new"),
)


@contextlib.asynccontextmanager
async def _store(backend: str) -> AsyncIterator[Store]:
    if backend == "memory":
        yield Store("memory://")
        return
    async with redis_store() as store:
        yield store


async def _phase(address: str, topic: str, prefix: str, mode: str, n: int) -> dict[str, Any]:
    from dejaq.driver import Client, Producer
    from dejaq.driver.producer import Outgoing

    due = int(time.time() * 1000) + 3_600_000
    statuses: dict[str, int] = {}
    async with Client(address) as client, Producer(client, topic) as producer:
        started = time.perf_counter()
        for start in range(0, n, BATCH):
            batch = [
                Outgoing(b"x" * 64, due + i, id=f"{prefix}{i}", on_duplicate=mode)
                for i in range(start, min(start + BATCH, n))
            ]
            for r in await producer.send_batch(batch):
                statuses[r.status.name] = statuses.get(r.status.name, 0) + 1
        seconds = time.perf_counter() - started
    return {"msgs_per_s": round(n / seconds), "seconds": round(seconds, 3), "statuses": statuses}


async def _backend(backend: str, n: int) -> dict[str, Any]:
    from dejaq.driver import Admin, Client

    out: dict[str, Any] = {}
    async with _store(backend) as store, broker(store.url, http_api=False) as b:
        async with Client(b.address) as client:
            await Admin(client).create_topic("debounce")
            await Admin(client).create_topic("warm-up")
        # Untimed: the broker's first frames (its streams, caches) are not a mode's cost.
        await _phase(b.address, "warm-up", "w", "keep", n)
        for name, mode, prefix in PHASES:
            out[name] = await _phase(b.address, "debounce", prefix, mode, n)
            print(backend, name, out[name], flush=True)
    return out


async def _main(args: argparse.Namespace) -> None:
    load_before = load_average()
    results = {backend: await _backend(backend, args.messages) for backend in args.backends}
    save_record(args.name, {"messages": args.messages, "batch": BATCH}, results, load_before)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=20_000, help="a phase (20,000)")
    p.add_argument(
        "--backends", nargs="+", default=["memory", "redis"], choices=["memory", "redis"]
    )
    p.add_argument("--name", default="debounce_produce", help="results/NAME.json")
    asyncio.run(_main(p.parse_args()))


if __name__ == "__main__":
    main()
