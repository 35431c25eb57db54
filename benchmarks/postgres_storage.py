"""Storage-level throughput of the postgresql:// backend: no broker, no network hop
but the one to PostgreSQL.

```
python benchmarks/postgres_storage.py [--url postgresql://...] [--messages N]
    [--fsync on|off] [--quick]
```

Without ``--url`` it starts a throwaway server from the local PostgreSQL binaries
(``tests/postgres_server.py``), with ``fsync`` on by default like a real server.
Every phase works on a fresh topic of 64 buckets; messages have 26-character ids
and 100-byte payloads, built before the clock starts.

- **insert** — N messages due a day ahead, in batches of 1,000: one producer,
  then four at once.
- **lease** — a backlog of N messages all due (the campaign herd), leased in
  batches of 100 until drained: one consumer for the whole topic; four at once
  (``FOR UPDATE SKIP LOCKED``); eight consumers owning 8 buckets each (the
  per-bucket path).
- **lease+ack** — one consumer, each batch of 100 acked before the next lease.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from common import save

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.postgres_server

from dejaq.core.buckets import Buckets
from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import Storage, storage_from_url
from dejaq.storage_plugins.base import LeaseRequest

BUCKETS = 64
INSERT_BATCH = 1_000
LEASE_BATCH = 100
LEASE_MS = 60_000
NOW = 1_700_000_000_000


def messages(n: int, due: int) -> list[NewMessage]:
    out = []
    for _ in range(n):
        id = uuid.uuid4().hex[:26]
        ts = due - random.randrange(1000)
        out.append(NewMessage(id, ts, os.urandom(100), hash(id) % BUCKETS))
    return out


def batches(items: list[NewMessage], size: int) -> list[list[NewMessage]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


async def fresh_topic(storage: Storage) -> str:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    await storage.create_topic(Topic(name, TopicSettings(buckets=BUCKETS, lease_ms=LEASE_MS)))
    return name


async def insert(storage: Storage, n: int, producers: int) -> dict[str, float]:
    topic = await fresh_topic(storage)
    work = batches(messages(n, NOW + 86_400_000), INSERT_BATCH)

    async def produce(k: int) -> None:
        for batch in work[k::producers]:
            await storage.insert(topic, batch)

    started = time.perf_counter()
    await asyncio.gather(*(produce(k) for k in range(producers)))
    elapsed = time.perf_counter() - started
    return {"msgs_per_s": n / elapsed, "ms_per_batch": 1000 * elapsed * producers / len(work)}


async def lease(
    storage: Storage, n: int, buckets_of: Sequence[Buckets], ack: bool = False
) -> dict[str, float]:
    """Drain a backlog of ``n`` due messages with one consumer per entry of ``buckets_of``."""
    topic = await fresh_topic(storage)
    for batch in batches(messages(n, NOW), INSERT_BATCH):
        await storage.insert(topic, batch)
    calls = 0

    async def consume(k: int, buckets: Buckets) -> int:
        nonlocal calls
        owner, taken = f"consumer-{k}", 0
        while True:
            leases = await storage.lease(
                LeaseRequest.of(topic, buckets, NOW, LEASE_BATCH, LEASE_MS, owner, 0)
            )
            calls += 1
            if not leases.delivered:
                return taken
            taken += len(leases.delivered)
            if ack:
                items = [(d.id, d.version) for d in leases.delivered]
                await storage.ack(topic, items, owner, NOW)

    started = time.perf_counter()
    taken = await asyncio.gather(*(consume(k, b) for k, b in enumerate(buckets_of)))
    elapsed = time.perf_counter() - started
    if sum(taken) != n:
        raise SystemExit(f"leased {sum(taken)} of {n} messages")
    return {"msgs_per_s": n / elapsed, "ms_per_call": 1000 * elapsed * len(buckets_of) / calls}


async def run(url: str, n: int) -> dict[str, Any]:
    storage = storage_from_url(url)
    await storage.open()
    try:
        await insert(storage, 2_000, 1)  # warm up: connections, prepared statements
        subsets = [range(k, BUCKETS, 8) for k in range(8)]
        return {
            "insert (batches of 1,000)": {
                "1 producer": await insert(storage, n, 1),
                "4 producers": await insert(storage, n, 4),
            },
            "lease (batches of 100)": {
                "whole topic, 1 consumer": await lease(storage, n, [None]),
                "whole topic, 4 consumers": await lease(storage, n, [None] * 4),
                "8 consumers x 8 buckets": await lease(storage, n, subsets),
            },
            "lease+ack (batches of 100)": {
                "whole topic, 1 consumer": await lease(storage, n, [None], ack=True),
            },
        }
    finally:
        await storage.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", help="an existing database (default: a throwaway local server)")
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--fsync", choices=["on", "off"], default="on")
    p.add_argument("--quick", action="store_true", help="20,000 messages")
    args = p.parse_args(argv)
    n = 20_000 if args.quick else args.messages
    config: dict[str, Any] = {"messages": n, "buckets": BUCKETS, "payload_bytes": 100}
    server = None
    url = args.url
    if url is None:
        from tests.postgres_server import PostgresServer, bin_dir

        server = PostgresServer.create(bin_dir(), fsync=args.fsync, full_page_writes="on")
        server.start()
        url = server.create_database("bench") + "?max_size=8"
        config["server"] = f"throwaway, fsync={args.fsync}"
    else:
        config["server"] = "given by --url"
    try:
        results = asyncio.run(run(url, n))
    finally:
        if server is not None:
            server.destroy()
    save("postgres_storage", {"config": config, **results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
