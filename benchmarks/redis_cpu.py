"""redis-server CPU a message of the Redis scripts alone, STORAGE LEVEL (no broker).

    python benchmarks/redis_cpu.py                  # 90,000 messages
    python benchmarks/redis_cpu.py --messages 30000 --buckets 8
    python benchmarks/redis_cpu.py --keys 100         # each message with one of 100 keys
    python benchmarks/redis_cpu.py --insert 100 --lease 100 --held 10000  # the product's shape

A fresh ``redis-server`` and the ``redis://`` storage in this process, on a
topic of ``--buckets`` buckets with the default dedup window (every ack leaves
a tombstone): batches of 300 messages due now are inserted, leased 600 at a
time and acked 300 at a time, in the steady scenario's batch sizes (``--insert``
and ``--lease`` set them: through the product a pass is small, since a
consumer's credit is far more than what a millisecond makes due: at 20k/s, 20
a millisecond over 64 buckets; ``--held`` keeps that many leased messages out,
acking the oldest beyond them, as a broker holds what it leased ahead until
its millisecond and consumers ack later), and the server's CPU (``/proc``) is split by
phase, each phase one script (insert, lease, settle). It measures the stored layout and
its scripts, not the product (``run.py --scenarios steady`` does, through the
broker); run it with an older release installed to compare two layouts.

Figures print and go to benchmarks/results/redis_cpu.json (``--name``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import deque

from suite.backends import redis_store
from suite.procstat import cpu_s, load_average
from suite.record import save_record

from dejaq.core.buckets import bucket_of
from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest, Storage

INSERT, LEASE, WARM_UP = 300, 600, 6_000
PAYLOAD = bytes(i % 256 for i in range(100))
PHASES = ("insert", "lease", "ack")


async def cycle(
    storage: Storage,
    pid: int,
    count: int,
    buckets: int,
    start: int,
    spent: dict[str, float],
    keys: int = 0,
    sizes: tuple[int, int, int] = (INSERT, LEASE, 0),
    out: deque[tuple[str, int]] | None = None,
) -> int:
    """Insert, lease and ack ``count`` messages from id number ``start``, in
    ``sizes`` (inserted and acked a call, leased a pass, held out: ``out``
    keeps them from one call to the next); the next number."""
    done, seq = 0, start
    insert, lease, held = sizes
    out = deque() if out is None else out
    while done < count:
        now = int(time.time() * 1000)
        for _ in range(max(lease // insert, 1)):
            ids = [f"msg-{seq + i:020d}" for i in range(insert)]
            batch = [
                NewMessage(id, now - 5, PAYLOAD, bucket_of(id, buckets), key=_key(seq + i, keys))
                for i, id in enumerate(ids)
            ]
            seq += insert
            before = cpu_s(pid)
            await storage.insert("t", batch)
            spent["insert"] += cpu_s(pid) - before
        before = cpu_s(pid)
        leases = await storage.lease(LeaseRequest("t", None, now, lease, 30_000, "owner-1"))
        spent["lease"] += cpu_s(pid) - before
        out.extend((m.id, m.version) for m in leases.delivered)
        before = cpu_s(pid)
        while len(out) > held:
            items = [out.popleft() for _ in range(min(insert, len(out) - held))]
            await storage.ack("t", items, "owner-1", now)
            done += len(items)
        spent["ack"] += cpu_s(pid) - before
    return seq


def _key(number: int, keys: int) -> str:
    """Message ``number``'s key: round the ``keys`` keys (0: none)."""
    return f"key-{number % keys}" if keys else ""


async def measure(
    messages: int, buckets: int, keys: int = 0, sizes: tuple[int, int, int] = (INSERT, LEASE, 0)
) -> dict[str, float]:
    async with redis_store() as store:
        assert store.pid is not None
        storage = storage_from_url(store.url)
        await storage.open()
        try:
            await storage.create_topic(Topic("t", TopicSettings(buckets=buckets)))
            spent, out = dict.fromkeys(PHASES, 0.0), deque[tuple[str, int]]()
            seq = await cycle(storage, store.pid, WARM_UP, buckets, 0, spent, keys, sizes, out)
            spent = dict.fromkeys(PHASES, 0.0)
            before, started = cpu_s(store.pid), time.monotonic()
            await cycle(storage, store.pid, messages, buckets, seq, spent, keys, sizes, out)
            total, wall = cpu_s(store.pid) - before, time.monotonic() - started
        finally:
            await storage.close()
    out = {f"{k}_us_per_message": round(v / messages * 1e6, 2) for k, v in spent.items()}
    out["us_per_message"] = round(total / messages * 1e6, 2)
    out["wall_s"] = round(wall, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=90_000)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--keys", type=int, default=0, help="messages spread over N keys")
    parser.add_argument("--insert", type=int, default=INSERT, help="inserted (and acked) a call")
    parser.add_argument("--lease", type=int, default=LEASE, help="leased a pass")
    parser.add_argument("--held", type=int, default=0, help="leased messages kept out")
    parser.add_argument("--name", default="redis_cpu")
    args = parser.parse_args()
    load_before = load_average()
    sizes = (args.insert, args.lease, args.held)
    figures = asyncio.run(measure(args.messages, args.buckets, args.keys, sizes))
    phases = ", ".join(f"{p} {figures[p + '_us_per_message']}" for p in PHASES)
    print(
        f"redis-server CPU a message (insert -> lease -> ack, storage level,"
        f" {args.keys} keys):"
        f" {figures['us_per_message']} us ({phases}); load average {load_before}"
        f" -> {load_average()}"
    )
    save_record(
        args.name,
        {"messages": args.messages, "buckets": args.buckets, "keys": args.keys, "sizes": sizes},
        figures,
        load_before,
    )


if __name__ == "__main__":
    main()
