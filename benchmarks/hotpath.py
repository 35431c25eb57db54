"""The compiled hot path against the Python modules, in one process each: CPU a message.

    python benchmarks/hotpath.py                # 5 rounds, alternating flavours
    python benchmarks/hotpath.py --rounds 3 --messages 50000
    python benchmarks/hotpath.py --rounds 1 --split    # also each step's share
    python benchmarks/hotpath.py --spread              # over the topic's buckets

A message's broker-side storage and codec work, as the broker does it at
steady on ``memory://``, without gRPC or other processes: decode a produce
frame, insert into the memory backend, lease what is due, pass it through the
dispatcher's window, encode the delivery frames into the consumer's outbox
(and decode them, as a consumer does, for the ids and versions it acks), ack.
Batches of --batch messages (the steady run's frames carry ~100).
Each round runs the compiled build and then ``DEJAQ_PURE_PYTHON=1`` in fresh
interpreters (alternating, so a busy machine weighs on both alike) and reads
each one's own CPU time (``time.process_time``), which other processes on the
machine disturb far less than a wall clock. Figures print and are saved to
benchmarks/results/hotpath.json. The whole broker's CPU a message comes from
``run.py`` (steady), which includes gRPC and the event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "hotpath.json"


async def cycle(
    messages: int, batch: int, split: dict[str, float] | None = None, spread: bool = False
) -> float:
    """CPU seconds for ``messages`` through decode, insert, lease, encode, ack;
    with ``split``, each step's CPU seconds added to it by name too (the clock
    read between steps costs a little, so the total is not comparable). Every
    message goes to bucket 0, or with ``spread`` to each of the topic's buckets
    in turn, as the broker's hash of the id spreads them (a lease then merges
    the buckets' due entries)."""
    from dejaq.broker.api.consume import Session
    from dejaq.broker.dispatch.window import Window
    from dejaq.core.model import NewMessage, Topic
    from dejaq.core.wire import batches
    from dejaq.storage_plugins.base import LeaseRequest
    from dejaq.storage_plugins.memory import MemoryStorage

    storage = MemoryStorage()
    await storage.open()
    topic = Topic("bench")
    buckets = topic.settings.buckets if spread else 1
    await storage.create_topic(topic)
    payload = b"x" * 100
    now = 1_000_000
    seq = 0
    clock = time.process_time
    window: Window[Session] = Window()  # the dispatcher's, holding each pass until due
    session = Session(topic, "c1", 30_000, 1 << 20, 4 << 20, 1 << 20)

    def step(name: str, since: float) -> float:
        """Adds the CPU since ``since`` to ``name`` (with ``split``); the clock now."""
        if split is None:
            return since
        at = clock()
        split[name] = split.get(name, 0.0) + at - since
        return at

    start = clock()
    for _ in range(messages // batch):
        ids = [f"m{seq + i}" for i in range(batch)]
        first = seq
        seq += batch
        frame = batches.encode_messages([now] * batch, [payload] * batch, ids)
        at = clock() if split is not None else start
        decoded = batches.decode_messages(frame)
        new = [
            NewMessage(i, t, p, (first + n) % buckets)
            for n, (i, t, p) in enumerate(
                zip(decoded.ids, decoded.timestamps, decoded.payloads, strict=True)
            )
        ]
        at = step("decode", at)
        await storage.insert("bench", new)
        at = step("insert", at)
        leases = await storage.lease(LeaseRequest.of("bench", None, now, batch, 30_000, "c1"))
        at = step("lease", at)
        window.hold(session, leases)
        [(_, due)] = window.due(now)
        at = step("window", at)
        session.deliver(due)  # the frames, as the consumer's stream sends them
        items: list[tuple[str, int]] = []
        while session.outbox.held_bytes:
            sent = await session.outbox.get()
            assert sent is not None
            got = batches.decode_delivery_columns(sent.deliveries)  # the consumer's side
            items += zip(got.ids, got.versions, strict=True)
        at = step("encode", at)
        await storage.ack("bench", items, "c1", now)
        step("ack", at)
        now += 1
    return clock() - start


def child(messages: int, batch: int, split: bool, spread: bool) -> None:
    from dejaq.core import hotpath

    asyncio.run(cycle(batch * 20, batch, spread=spread))  # warm up: imports, first allocations
    cpu = asyncio.run(cycle(messages, batch, spread=spread))
    out: dict[str, object] = {"status": hotpath.status(), "us_per_message": cpu / messages * 1e6}
    if split:
        steps: dict[str, float] = {}
        asyncio.run(cycle(messages, batch, steps, spread))
        out["split_us"] = {k: round(v / messages * 1e6, 2) for k, v in steps.items()}
    print(json.dumps(out))


def measure(
    flavour: str, messages: int, batch: int, split: bool, spread: bool
) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "DEJAQ_PURE_PYTHON"}
    if flavour == "pure":
        env["DEJAQ_PURE_PYTHON"] = "1"
    out = subprocess.run(
        [
            *(sys.executable, __file__, "--child", "--messages", str(messages)),
            *("--batch", str(batch), *(["--split"] if split else [])),
            *(["--spread"] if spread else []),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument(
        "--split", action="store_true", help="also time each step apart, in a second cycle"
    )
    p.add_argument(
        "--spread", action="store_true", help="messages over the topic's buckets, not all in 0"
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a.messages, a.batch, a.split, a.spread)
        return
    runs: dict[str, list[float]] = {"compiled": [], "pure": []}
    status = {}
    for r in range(a.rounds):
        for flavour in runs:
            got = measure(flavour, a.messages, a.batch, a.split, a.spread)
            runs[flavour].append(round(float(str(got["us_per_message"])), 2))
            status[flavour] = got["status"]
            us = runs[flavour][-1]
            print(f"round {r + 1} {flavour:8} {us:6.2f} us a message  ({got['status']})")
            if "split_us" in got:
                print(f"        {flavour:8} by step, us a message: {got['split_us']}")
    medians = {f: statistics.median(v) for f, v in runs.items()}
    print(
        f"median: compiled {medians['compiled']:.2f} us, pure {medians['pure']:.2f} us a message"
        f" ({medians['pure'] / medians['compiled']:.2f}x); load {os.getloadavg()[0]:.1f}"
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "messages": a.messages,
                "batch": a.batch,
                "spread": a.spread,
                "us_per_message": runs,
                "median": medians,
                "status": status,
                "load_average": os.getloadavg(),
                "cpus": os.cpu_count(),
            },
            indent=1,
        )
    )
    print(f"saved {RESULTS}")


if __name__ == "__main__":
    main()
