"""A lease pass beside one key's backlog, through the storage plugin: its time and the drain rate.

    python benchmarks/fair_pass.py                          # sqlite and postgres, 200k
    python benchmarks/fair_pass.py --backends sqlite --backlog 50000

Per backend and per flavour, a fresh store holding ``--backlog`` messages of
one key ("campaign") due at one millisecond, and ``--others`` keys with
``--each`` messages due each just after it: with keys, and the same load
without any key. The storage plugin is called the way the broker calls it
(not measured: the fill). Figures: the time of each of the first
``--passes`` lease passes of ``--limit`` (median and max), how many of the
other keys' messages the first pass took (with keys: all of them, when they
fit its share), and the drain rate of the whole backlog in passes of
``--limit`` each acked at once (msgs/s, lease and ack). A storage-level
figure, without gRPC or the broker: the cost of the pass itself.

Figures print as a table and go to benchmarks/results/fair_pass.json.
Timings on a shared machine are noisy: compare runs made side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from typing import Any

from suite.backends import store
from suite.procstat import load_average
from suite.record import save_record

from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import Storage, storage_from_url
from dejaq.storage_plugins.base import LeaseRequest

TOPIC = "fair"
BUCKETS = 16
DUE = 1_000_000  # the campaign's millisecond
NOW = DUE + 1_000
LEASE_MS = 60_000
FILL_BATCH = 1_000
PAYLOAD = b"x" * 100


def load(args: argparse.Namespace, keyed: bool) -> list[NewMessage]:
    """The campaign's backlog, then the other keys' few messages."""
    campaign = "campaign" if keyed else ""
    out = [
        NewMessage(f"c{i:07d}", DUE, PAYLOAD, i % BUCKETS, key=campaign)
        for i in range(args.backlog)
    ]
    for k in range(args.others):
        key = f"user-{k:03d}" if keyed else ""
        out += [
            NewMessage(f"u{k:03d}-{j}", DUE + 1 + j, PAYLOAD, (k + j) % BUCKETS, key=key)
            for j in range(args.each)
        ]
    return out


async def fill(storage: Storage, messages: list[NewMessage]) -> None:
    for start in range(0, len(messages), FILL_BATCH):
        await storage.insert(TOPIC, messages[start : start + FILL_BATCH])


async def one_pass(storage: Storage, limit: int, owner: str) -> tuple[float, list[Any]]:
    request = LeaseRequest.of(TOPIC, None, NOW, limit, LEASE_MS, owner)
    start = time.perf_counter()
    leases = await storage.lease(request)
    return time.perf_counter() - start, leases.delivered


async def flavour(url: str, args: argparse.Namespace, keyed: bool) -> dict[str, Any]:
    storage = storage_from_url(url)
    await storage.open()
    try:
        await storage.create_topic(Topic(TOPIC, TopicSettings(buckets=BUCKETS)))
        await fill(storage, load(args, keyed))
        passes: list[float] = []
        others = 0
        drained = 0
        start = time.perf_counter()
        while True:
            took, delivered = await one_pass(storage, args.limit, "c1")
            if not delivered:
                break
            if not passes:
                others = sum(1 for d in delivered if d.id.startswith("u"))
            if len(passes) < args.passes:
                passes.append(took * 1000)
            items = [(d.id, d.version) for d in delivered]
            await storage.ack(TOPIC, items, "c1", NOW)
            drained += len(delivered)
        drain_s = time.perf_counter() - start
        return {
            "pass_ms_median": round(statistics.median(passes), 2),
            "pass_ms_max": round(max(passes), 2),
            "others_in_first_pass": others,
            "others": args.others * args.each,
            "drained": drained,
            "drain_msgs_s": round(drained / drain_s),
        }
    finally:
        await storage.close()


async def backend(name: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for keyed in (True, False):
        with tempfile.TemporaryDirectory() as workdir:
            async with store(name, workdir) as s:
                out["keys" if keyed else "no-keys"] = await flavour(s.url, args, keyed)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backends", default="sqlite,postgres")
    p.add_argument("--backlog", type=int, default=200_000)
    p.add_argument("--others", type=int, default=100)
    p.add_argument("--each", type=int, default=3)
    p.add_argument("--limit", type=int, default=1_000)
    p.add_argument("--passes", type=int, default=5)
    args = p.parse_args()
    load_before = load_average()
    results: dict[str, Any] = {}
    for name in args.backends.split(","):
        results[name] = r = asyncio.run(backend(name, args))
        for flavour_name, f in r.items():
            print(
                f"{name:9} {flavour_name:8} pass {f['pass_ms_median']:>8} ms median"
                f" {f['pass_ms_max']:>8} ms max  others in the first pass"
                f" {f['others_in_first_pass']:>4}/{f['others']}"
                f"  drain {f['drain_msgs_s']:>7,} msgs/s ({f['drained']:,})",
                flush=True,
            )
    save_record("fair_pass", vars(args), results, load_before)


if __name__ == "__main__":
    main()
