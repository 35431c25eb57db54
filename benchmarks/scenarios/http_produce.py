"""Produce over the HTTP/JSON API, batches of 1,000, beside the gRPC driver's
figure of the same run (``produce.py``).

The same messages as the driver's point (100-byte text payloads, 26-character
ids, due a day ahead), ``in_flight`` requests at once on one aiohttp session
(keep-alive), each body a JSON batch encoded in the timed loop as a client
encodes it. msgs/s counts accepted messages from the first request to the
last answer, after a warm-up request.
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


async def point(ctx: Ctx, grpc_msgs_per_s: int | None) -> dict[str, Any]:
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
    return {
        "batch": BATCH,
        "messages": sent,
        "accepted": accepted,
        "capped": sent < count,
        "seconds": round(seconds, 3),
        "msgs_per_s": msgs_per_s,
        "grpc_msgs_per_s": grpc_msgs_per_s,
        "ratio_to_grpc": round(msgs_per_s / grpc_msgs_per_s, 3) if grpc_msgs_per_s else None,
        **used.as_dict(),
    }
