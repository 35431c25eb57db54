"""``dejaq consume``: receive, ack, and print one JSON line per delivery."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any

from dejaq.driver.cli.common import add_broker, client_command, duration_ms, emit, payload_fields
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer


def register(sub: Any) -> None:
    p = sub.add_parser(
        "consume",
        help="receive and ack messages",
        description="Receive due messages, ack each, and print one JSON line per delivery"
        " (id, timestamp_ms, received_at_ms, deliveries, payload).",
    )
    p.add_argument("topic")
    p.add_argument("--count", type=int, default=0, help="stop after N messages (default: run on)")
    p.add_argument("--json", action="store_true", help="JSON lines (the default output)")
    p.add_argument("--consumer-id", default="", help="consumer id (default: generated)")
    p.add_argument("--lease", help="lease per delivery, e.g. 30s (default: the topic's)")
    p.add_argument("--credits", type=int, default=100, help="credit window (default 100)")
    p.add_argument("--idle", help="stop after this long without a delivery, e.g. 5s")
    add_broker(p)
    p.set_defaults(run=client_command(consume))


async def consume(client: Client, args: argparse.Namespace) -> int:
    consumer = Consumer(
        client,
        args.topic,
        consumer_id=args.consumer_id,
        lease_ms=duration_ms(args.lease) if args.lease else 0,
        credits=args.credits,
    )
    idle_s = duration_ms(args.idle) / 1000 if args.idle else None
    received = 0
    async with consumer:
        it = aiter(consumer)
        while not args.count or received < args.count:
            try:
                d = await asyncio.wait_for(anext(it), idle_s)
            except (StopAsyncIteration, TimeoutError):
                break
            await d.ack()
            received += 1
            emit(
                {
                    "id": d.id,
                    "timestamp_ms": d.timestamp_ms,
                    "received_at_ms": d.received_at_ms,
                    "deliveries": d.deliveries,
                    **payload_fields(d.payload),
                }
            )
        with contextlib.suppress(Exception):
            await it.aclose()  # type: ignore[attr-defined]
    return 0
