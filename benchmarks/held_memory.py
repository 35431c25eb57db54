"""What a broker holds for callers it refuses or consumers that do not read.

    python benchmarks/held_memory.py                     # both
    python benchmarks/held_memory.py --scenarios refused

A fresh ``dejaq broker --storage memory://`` process per scenario; its RSS
(``/proc``) is read before, after, and again after ``--idle-s`` of idling:

- refused    one Produce stream after another, each with one frame that is
             refused: 12 frames of 8 MiB to a topic that does not exist
             (NOT_FOUND), then 8 frames of 30 MB of random bytes
             (INVALID_ARGUMENT). A broker that frees a refused frame when its
             call ends stays near where it started.
- consumers  3 raw Consume streams that never read (credits 1,000,000) on a
             topic with 4 KB payloads due now, ``--messages`` of them: what
             the broker holds for the three (bounded by its --max-held-bytes,
             DEJAQ_MAX_HELD_BYTES when ``--max-held-bytes`` is given here), and
             how many of them it cut off. The payloads stored are part of it:
             ``--consumers 0`` shows the broker with them alone.

Figures print as a table and go to benchmarks/results/held_memory.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

import grpc
from prometheus_client.parser import text_string_to_metric_families
from suite.broker import broker
from suite.procstat import rss_bytes

from dejaq.core.clock import now_ms
from dejaq.core.wire.batches import encode_messages
from dejaq.core.wire.frames import MAX_FRAME_BYTES
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc

MIB = 1 << 20
RESULTS = Path(__file__).parent / "results" / "held_memory.json"
OPTIONS = [("grpc.max_send_message_length", MAX_FRAME_BYTES)]
PAYLOAD = 4000
SETTLE_S = 1.0


def mib(pid: int) -> float:
    return round(rss_bytes(pid) / MIB, 1)


async def refused_once(address: str, request: pb.ProduceRequest) -> str:
    """One Produce stream with one frame; the status it ends with."""
    async with grpc.aio.insecure_channel(address, options=OPTIONS) as channel:
        call = pb_grpc.TimelineStub(channel).Produce()
        await call.write(request)
        await call.done_writing()
        return str((await call.code()).name)


async def refused(args: argparse.Namespace) -> dict[str, Any]:
    async with broker("memory://") as b:
        async with Client(b.address) as client:
            await Admin(client).create_topic("kept")
        start = mib(b.pid)
        missing = encode_messages([0], [b"x" * (8 * MIB - 4096)], ["m"])
        codes: list[str] = []
        for _ in range(12):
            request = pb.ProduceRequest(topic="missing", batch=missing)
            codes.append(await refused_once(b.address, request))
        after_not_found = mib(b.pid)
        for _ in range(8):
            request = pb.ProduceRequest(topic="kept", batch=os.urandom(30_000_000))
            codes.append(await refused_once(b.address, request))
        after = mib(b.pid)
        await asyncio.sleep(args.idle_s)
        return {
            "statuses": sorted(set(codes)),
            "rss_start_mib": start,
            "rss_after_not_found_mib": after_not_found,
            "rss_after_mib": after,
            "rss_idle_mib": mib(b.pid),
        }


async def never_reads(address: str, topic: str, ready: asyncio.Event) -> None:
    """A consumer stream that says Hello with a full window and never reads
    (a cut-off cannot reach it either: its status waits behind unread frames)."""
    async with grpc.aio.insecure_channel(address) as channel:
        call = pb_grpc.TimelineStub(channel).Consume()
        hello = pb.Hello(topic=topic, credits=1_000_000, lease_ms=600_000)
        await call.write(pb.ConsumeRequest(hello=hello))
        ready.set()
        try:
            await asyncio.Event().wait()
        finally:
            call.cancel()


def cut_off(metrics: str) -> int:
    """Consumers the broker has cut off, from its /metrics."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=5) as response:
        text = response.read().decode()
    return sum(
        int(s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "dejaq_consumers_cut_off_total"
    )


async def consumers(args: argparse.Namespace) -> dict[str, Any]:
    env = {"DEJAQ_MAX_HELD_BYTES": str(args.max_held_bytes)} if args.max_held_bytes else None
    async with broker("memory://", env=env) as b:
        async with Client(b.address) as client:
            await Admin(client).create_topic("held")
            start = mib(b.pid)
            streams = []
            for _ in range(args.consumers):
                ready = asyncio.Event()
                streams.append(asyncio.create_task(never_reads(b.address, "held", ready)))
                await ready.wait()
            payload = os.urandom(PAYLOAD)
            t0 = time.monotonic()
            async with Producer(client, "held") as producer:
                due = now_ms()
                for start_at in range(0, args.messages, 1000):
                    count = min(1000, args.messages - start_at)
                    await producer.send_batch([Outgoing(payload, due) for _ in range(count)])
            await asyncio.sleep(SETTLE_S)
            peak = mib(b.pid)
            await asyncio.sleep(args.idle_s)
            idle = mib(b.pid)
            for s in streams:
                s.cancel()
            await asyncio.gather(*streams, return_exceptions=True)
            return {
                "consumers_cut_off": cut_off(b.metrics),
                "messages": args.messages,
                "consumers": args.consumers,
                "payload_bytes": PAYLOAD,
                "max_held_bytes": args.max_held_bytes or "default",
                "produce_s": round(time.monotonic() - t0, 1),
                "rss_start_mib": start,
                "rss_after_mib": peak,
                "rss_idle_mib": idle,
            }


SCENARIOS = {"refused": refused, "consumers": consumers}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--idle-s", type=float, default=5.0)
    p.add_argument("--messages", type=int, default=100_000)
    p.add_argument("--max-held-bytes", type=int, default=0)
    p.add_argument("--consumers", type=int, default=3)
    args = p.parse_args()
    results: dict[str, Any] = {}
    for name in args.scenarios.split(","):
        results[name] = asyncio.run(SCENARIOS[name](args))
        print(f"{name}: {json.dumps(results[name])}", flush=True)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"saved to {RESULTS}")


if __name__ == "__main__":
    main()
