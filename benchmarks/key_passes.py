"""Lease passes on memory:// with keys: what a pass costs beside a large one-key
backlog, how such a backlog drains, a pass among many keys, and the memory of
an active key.

    python benchmarks/key_passes.py [--backlog 1000000] [--keys 10000]

Prints one line a figure. Timings are wall clock on whatever else the machine
runs: compare runs made side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc

from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.memory import MemoryStorage

NOW = 1_800_000_000_000
BUCKETS = 4
LIMIT = 1_000
BATCH = 10_000
PAYLOAD = b"p" * 100


def message(i: int, ts: int, key: str) -> NewMessage:
    return NewMessage(f"message-{i:018d}", ts, PAYLOAD, i % BUCKETS, 0, 0, 0, key, b"")


async def fresh(name: str = "t") -> MemoryStorage:
    storage = MemoryStorage()
    settings = TopicSettings(buckets=BUCKETS, lease_ms=600_000)
    await storage.create_topic(Topic(name, settings, created_at_ms=1))
    # A broker's passes run all along: the indexes stand at now before messages come.
    await one_pass(storage, NOW)
    return storage


async def insert(storage: MemoryStorage, messages: list[NewMessage]) -> None:
    for at in range(0, len(messages), BATCH):
        await storage.insert("t", messages[at : at + BATCH])


async def one_pass(storage: MemoryStorage, now: int) -> tuple[float, int]:
    request = LeaseRequest.of("t", None, now, LIMIT, 600_000, "bench")
    start = time.perf_counter()
    leases = await storage.lease(request)
    return time.perf_counter() - start, len(leases.delivered)


async def backlog(n: int, key: str, others: int) -> None:
    """A pass beside ``n`` messages of ``key`` due at one ms (and ``others`` keys
    with 3 due each), then the whole drain."""
    storage = await fresh()
    await insert(storage, [message(i, NOW - 60_000, key) for i in range(n)])
    await insert(storage, [message(n + i, NOW - i % 1000, f"k{i // 3}") for i in range(3 * others)])
    label = f"{n} of key {key!r}" if key else f"{n} without a key"
    passes = [(await one_pass(storage, NOW))[0] for _ in range(5)]
    print(f"{label} + {others} keys: a pass of {LIMIT}: {statistics.median(passes) * 1e3:.2f} ms")
    total, taken, start = 0.0, 0, time.perf_counter()
    while True:
        spent, got = await one_pass(storage, NOW)
        total += spent
        taken += got
        if got < LIMIT:
            break
    wall = time.perf_counter() - start
    print(f"{label}: drained {taken} in passes of {LIMIT}: {taken / wall:,.0f} msgs/s")


async def many_keys(keys: int) -> None:
    storage = await fresh()
    await insert(storage, [message(i, NOW - i % 5000, f"k{i // 2}") for i in range(2 * keys)])
    passes = [(await one_pass(storage, NOW))[0] for _ in range(5)]
    median = statistics.median(passes) * 1e3
    print(f"{keys} keys with 2 due each: a pass of {LIMIT}: {median:.2f} ms")


async def traced(keys: int, keyed: bool) -> int:
    gc.collect()
    tracemalloc.start()
    storage = await fresh()
    base = tracemalloc.get_traced_memory()[0]
    await insert(
        storage, [message(i, NOW + 1000 + i, f"key-{i:08d}" if keyed else "") for i in range(keys)]
    )
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    del storage
    return used


async def per_key(keys: int) -> None:
    with_keys, without = await traced(keys, True), await traced(keys, False)
    print(
        f"{keys} keys of one message each: {(with_keys - without) / keys:,.0f} bytes a key "
        f"more than {keys} messages without a key (key text included)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backlog", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    args = parser.parse_args()
    await backlog(args.backlog, "campaign", 100)
    await backlog(args.backlog, "", 0)
    await many_keys(args.keys)
    for keys in (args.keys, 10 * args.keys):
        await per_key(keys)


if __name__ == "__main__":
    asyncio.run(main())
