"""The steady load on memory:// through the storage plugin, without keys and
with every message keyed round many keys: the CPU a message costs.

    python benchmarks/many_keys.py [--keys 10000] [--rate 20000] [--seconds 5]

A simulated clock (no sleeps): each millisecond a batch of ``--rate``/1000
messages due a little later is inserted, then a lease pass at that
millisecond takes what is due (in passes of 1,000, with a 30 s lease) and
acks it at once, as a broker and its consumers do. Prints, for each flavour,
the process CPU µs a message (insert, lease, ack), the messages delivered
and the lanes the timeline holds at the end. The broker's gRPC and the
consumers are left out: this is the storage's share. Run both flavours in
one process, alternating, and compare them side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time

from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.memory import MemoryStorage

NOW = 1_800_000_000_000
BUCKETS = 64
LIMIT = 1_000
LEASE_MS = 30_000
AHEAD_MS = 20  # how far ahead of its due time a message is inserted
PAYLOAD = b"p" * 100


async def run(keys: int, rate: int, seconds: float) -> tuple[float, int, int]:
    """(CPU µs a message, messages delivered, lanes of keys left)."""
    storage = MemoryStorage()
    await storage.create_topic(Topic("t", TopicSettings(buckets=BUCKETS, lease_ms=LEASE_MS), 1))
    per_ms = max(1, rate // 1000)
    delivered = 0
    n = 0
    gc.collect()
    start = time.process_time()
    for ms in range(int(seconds * 1000)):
        now = NOW + ms
        batch = []
        for _ in range(per_ms):
            key = f"key-{n % keys:06d}" if keys else ""
            batch.append(
                NewMessage(f"m-{n:012d}", now + AHEAD_MS, PAYLOAD, n % BUCKETS, 0, 0, 0, key, b"")
            )
            n += 1
        await storage.insert("t", batch)
        while True:
            leases = await storage.lease(LeaseRequest.of("t", None, now, LIMIT, LEASE_MS, "c"))
            got = leases.delivered
            if got:
                await storage.ack("t", [(m.id, m.version) for m in got], "c", now)
            delivered += len(got)
            if len(got) < LIMIT:
                break
    spent = time.process_time() - start
    lanes = len(storage._tl("t").keyed.lanes)
    return spent * 1e6 / max(delivered, 1), delivered, lanes


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    for _ in range(args.runs):
        for keys in (0, args.keys):
            us, delivered, lanes = await run(keys, args.rate, args.seconds)
            label = f"{keys:,} keys" if keys else "no key"
            print(
                f"{label}: {us:.1f} µs a message, {delivered:,} delivered, {lanes:,} key lanes left"
            )


if __name__ == "__main__":
    asyncio.run(main())
