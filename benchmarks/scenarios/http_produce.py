"""Produce over the HTTP/JSON API, batches of 1,000, beside the gRPC driver's
figure of the same run (``produce.py``).

The same messages as the driver's point (100-byte text payloads, 26-character
ids, due a day ahead), ``in_flight`` requests at once on one aiohttp session
(keep-alive), each body a JSON batch encoded in the timed loop as a client
encodes it. msgs/s counts accepted messages from the first request to the
last answer, after a warm-up request. Beside it, the broker's CPU a message
over HTTP and over gRPC, and the share of the HTTP figure the HTTP surface
adds (1 - gRPC / HTTP).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
from suite.harness import Ctx
from suite.messages import PAYLOAD, Ids
from suite.stats import cpu, rate

from dejaq.core.clock import now_ms

DAY_MS = 24 * 3600 * 1000
BATCH = 1000


def broker_us_per_msg(p: dict[str, Any] | None) -> float | None:
    """The broker's CPU µs per accepted message of a produce point."""
    if not p or not p.get("accepted"):
        return None
    cpu_s: float = p["broker_cpu_s"]
    accepted: int = p["accepted"]
    return round(cpu_s * 1e6 / accepted, 2)


async def point(ctx: Ctx, grpc: dict[str, Any] | None) -> dict[str, Any]:
    """HTTP batches of 1,000, beside ``grpc``: the driver's point of the same batch size."""
    topic = await ctx.topic("produce-http")
    count = ctx.plan.produce_counts[BATCH]
    far = now_ms() + DAY_MS
    text = PAYLOAD.decode()
    ids = Ids().take(count)
    messages = [
        {"id": m, "timestamp_ms": far + i % 60_000, "payload": text} for i, m in enumerate(ids)
    ]
    queue = [messages[i : i + BATCH] for i in range(0, count, BATCH)]
    queue.reverse()
    url = f"{ctx.broker.http}/v1/topics/{topic}/batches"
    accepted = sent = 0

    async def post(session: aiohttp.ClientSession, chunk: list[dict[str, Any]]) -> int:
        body = json.dumps({"messages": chunk})
        async with session.post(url, data=body, headers={"content-type": "application/json"}) as r:
            answer = await r.json()
            if r.status != 200:
                raise RuntimeError(f"HTTP produce answered {r.status}: {answer}")
            return sum(1 for x in answer["results"] if x["status"] == "ACCEPTED")

    async def worker(session: aiohttp.ClientSession, deadline: float) -> None:
        nonlocal accepted, sent
        while queue and time.perf_counter() < deadline:
            chunk = queue.pop()
            sent += len(chunk)
            stored = await post(session, chunk)  # awaited first: += would read a stale total
            accepted += stored

    connector = aiohttp.TCPConnector(limit=ctx.plan.in_flight)
    try:
        async with aiohttp.ClientSession(connector=connector) as session:
            await post(session, [{"id": "warm-up-http", "timestamp_ms": far}])
            with cpu(ctx.broker.pid) as used:
                start = time.perf_counter()
                deadline = start + ctx.plan.produce_cap_s
                await asyncio.gather(
                    *(worker(session, deadline) for _ in range(ctx.plan.in_flight))
                )
                seconds = time.perf_counter() - start
    finally:
        await ctx.drop(topic)
    msgs_per_s = rate(accepted, seconds)
    grpc_msgs_per_s = grpc.get("msgs_per_s") if grpc else None
    broker_s = used.broker_s
    http_us = round(broker_s * 1e6 / accepted, 2) if accepted else None
    grpc_us = broker_us_per_msg(grpc)
    return {
        "batch": BATCH,
        "messages": sent,
        "accepted": accepted,
        "capped": sent < count,
        "seconds": round(seconds, 3),
        "msgs_per_s": msgs_per_s,
        "grpc_msgs_per_s": grpc_msgs_per_s,
        "ratio_to_grpc": round(msgs_per_s / grpc_msgs_per_s, 3) if grpc_msgs_per_s else None,
        # The broker's CPU a message, over HTTP and over gRPC: the share of the HTTP
        # figure that is the HTTP surface's own (JSON, the aiohttp server).
        "broker_us_per_msg": http_us,
        "grpc_broker_us_per_msg": grpc_us,
        "http_cpu_share": round(1 - grpc_us / http_us, 3) if http_us and grpc_us else None,
        **used.as_dict(),
    }
