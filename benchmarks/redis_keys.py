"""A lease pass over one key's backlog beside other keys, STORAGE LEVEL (no broker).

    python benchmarks/redis_keys.py                     # 200,000 of one key
    python benchmarks/redis_keys.py --backlog 20000

A fresh ``redis-server`` and the ``redis://`` storage in this process, on a
topic of ``--buckets`` buckets: ``--backlog`` messages of key ``campaign`` due
at one millisecond, then ``--others`` keys with ``--each`` messages each due a
millisecond later. It times the first lease pass (limit ``--limit``: its wall
time and the server's CPU), counts the other keys' messages that pass took
(a fair pass takes them all at once), and drains everything, leasing and
acking ``--limit`` at a time, for the drain rate. The same is run with no key
on any message (the pass then goes in timestamp order, as before keys) to
compare.

Figures print and go to benchmarks/results/redis_keys.json (``--name``).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from suite.backends import redis_store
from suite.procstat import cpu_s, load_average
from suite.record import save_record

from dejaq.core.buckets import bucket_of
from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest, Storage

BATCH = 1_000
PAYLOAD = bytes(i % 256 for i in range(100))


def backlog(args: argparse.Namespace, keyed: bool, due: int) -> list[NewMessage]:
    """The campaign then the other keys' messages (no key at all unless ``keyed``)."""
    out = []
    for i in range(args.backlog):
        id = f"c{i:09d}"
        out.append(
            NewMessage(id, due, PAYLOAD, bucket_of(id, args.buckets), key="campaign" * keyed)
        )
    for k in range(args.others):
        for j in range(args.each):
            id = f"o{k:04d}-{j}"
            key = f"user-{k}" if keyed else ""
            out.append(NewMessage(id, due + 1, PAYLOAD, bucket_of(id, args.buckets), key=key))
    return out


async def run(storage: Storage, pid: int, args: argparse.Namespace, keyed: bool) -> dict[str, Any]:
    topic = "keyed" if keyed else "plain"
    await storage.create_topic(Topic(topic, TopicSettings(buckets=args.buckets)))
    due = int(time.time() * 1000) - 1_000
    messages = backlog(args, keyed, due)
    for i in range(0, len(messages), BATCH):
        await storage.insert(topic, messages[i : i + BATCH])
    now = due + 10
    request = LeaseRequest(topic, None, now, args.limit, 600_000, "owner-1")
    before_cpu, started = cpu_s(pid), time.perf_counter()
    first = await storage.lease(request)
    pass_ms = (time.perf_counter() - started) * 1000
    pass_cpu_ms = (cpu_s(pid) - before_cpu) * 1000
    others = sum(1 for m in first.delivered if m.id.startswith("o"))
    taken = len(first.delivered)
    passes, others_done_after = 1, (1 if others == args.others * args.each else 0)
    seen_others = others
    started = time.perf_counter()
    leases = first
    while leases.delivered:
        items = [(m.id, m.version) for m in leases.delivered]
        for i in range(0, len(items), 500):
            await storage.ack(topic, items[i : i + 500], "owner-1", now)
        leases = await storage.lease(request)
        passes += 1
        taken += len(leases.delivered)
        seen_others += sum(1 for m in leases.delivered if m.id.startswith("o"))
        if not others_done_after and seen_others == args.others * args.each:
            others_done_after = passes
    drain_s = time.perf_counter() - started
    assert taken == len(messages), (taken, len(messages))
    return {
        "first_pass_ms": round(pass_ms, 2),
        "first_pass_server_cpu_ms": round(pass_cpu_ms, 2),
        "others_in_first_pass": others,
        "passes_until_every_other_key_served": others_done_after,
        "drain_messages_per_s": round(taken / drain_s),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    async with redis_store() as store:
        assert store.pid is not None
        storage = storage_from_url(store.url)
        await storage.open()
        try:
            return {
                "keyed": await run(storage, store.pid, args, True),
                "no_key": await run(storage, store.pid, args, False),
            }
        finally:
            await storage.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backlog", type=int, default=200_000)
    parser.add_argument("--others", type=int, default=100)
    parser.add_argument("--each", type=int, default=3)
    parser.add_argument("--limit", type=int, default=1_000)
    parser.add_argument("--buckets", type=int, default=64)
    parser.add_argument("--name", default="redis_keys")
    args = parser.parse_args()
    load_before = load_average()
    figures = asyncio.run(measure(args))
    for variant, f in figures.items():
        print(f"{variant}: {f}")
    print(f"load average {load_before} -> {load_average()}")
    save_record(args.name, vars(args), figures, load_before)


if __name__ == "__main__":
    main()
