"""``dejaq consume``: print one JSON line per delivery as it arrives, ack in groups.

Each delivery is printed (and stdout flushed) the moment it is taken; its ack
is queued and leaves grouped with the others (``dejaq.driver.settle``), so the
command never waits a broker round trip per message. On the way out (``--count``
reached, ``--idle`` passed, SIGINT or SIGTERM) the queued acks are flushed
before the goodbye. A refused ack is reported on stderr and exits 1; one lost
with its broker is reported and the message comes again (``settle_report``).

A lost broker does not end it: it says so on stderr, once an outage, and
reconnects (to the next ``--broker``, with a jittered back-off) until it is
back or the command is interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import signal
import sys
from typing import Any

from dejaq.core.model import KIND_PRIORITY
from dejaq.driver.admin import Admin
from dejaq.driver.cli.common import (
    add_broker,
    client_command,
    emit,
    key_fields,
    payload_fields,
)
from dejaq.driver.cli.durations import duration
from dejaq.driver.cli.numbers import INT64, UINT32, whole
from dejaq.driver.cli.settle_report import SettleReport
from dejaq.driver.client import Client
from dejaq.driver.consumer import HOLD_MS, Consumer

# The consumer's reconnect lines (a lost broker, and back), on stderr.
_DRIVER_LOG = logging.getLogger("dejaq.driver.consumer")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "consume",
        help="receive and ack messages",
        description="Receive due messages, print one JSON line per delivery"
        " (id, timestamp_ms, received_at_ms, deliveries, payload; on a priority topic"
        " also priority, and timestamp_ms is when it became available) and ack each.",
    )
    p.add_argument("topic")
    p.add_argument(
        "--count", type=whole(INT64), default=0, help="stop after N messages (default: run on)"
    )
    p.add_argument("--json", action="store_true", help="JSON lines (the default output)")
    p.add_argument("--consumer-id", default="", help="consumer id (default: generated)")
    p.add_argument(
        "--lease",
        type=duration,
        metavar="DURATION",
        help="lease per delivery, e.g. 30s (default: the topic's)",
    )
    p.add_argument(
        "--credits", type=whole(UINT32, least=1), default=2048, help="credit window (default 2048)"
    )
    p.add_argument(
        "--hold",
        type=duration,
        metavar="DURATION",
        help="let the broker send a message up to this long before it is due, e.g. 50ms;"
        " it is printed when due (default 1s, of which the broker sends at most its"
        " --send-ahead-ms; 0 = the broker holds it)",
    )
    p.add_argument(
        "--idle",
        type=duration,
        metavar="DURATION",
        help="stop after this long without a delivery, e.g. 5s",
    )
    add_broker(p)
    p.set_defaults(run=client_command(consume))


async def consume(client: Client, args: argparse.Namespace) -> int:
    report = SettleReport(sys.stderr)
    topic = await Admin(client).describe_topic(args.topic)
    with_priority = topic.topic.settings.kind == KIND_PRIORITY
    consumer = Consumer(
        client,
        args.topic,
        consumer_id=args.consumer_id,
        lease_ms=args.lease or 0,
        credits=args.credits,
        on_settle_error=report,
        hold_ms=HOLD_MS if args.hold is None else args.hold,
        retry_timeout_s=math.inf,
    )
    _say_reconnects()
    idle_s = None if args.idle is None else args.idle / 1000
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    # SIGINT already cancels the main task (asyncio.run); SIGTERM does the same.
    loop.add_signal_handler(signal.SIGTERM, main.cancel)
    interrupted = False
    async with consumer:
        received = 0
        try:
            while not args.count or received < args.count:
                d = await consumer.receive(idle_s)
                if d is None:
                    break
                line: dict[str, Any] = {
                    "id": d.id,
                    "timestamp_ms": d.timestamp_ms,
                    "received_at_ms": d.received_at_ms,
                    "deliveries": d.deliveries,
                }
                if with_priority:
                    line["priority"] = d.priority
                emit({**line, **key_fields(d.key, d.headers), **payload_fields(d.payload)})
                await d.ack()
                received += 1
        except TimeoutError:
            pass  # --idle passed
        except asyncio.CancelledError:
            interrupted = True  # leave through the flush and goodbye below
        # Leaving the block flushes the queued acks, then says goodbye.
    loop.remove_signal_handler(signal.SIGTERM)
    if interrupted:
        raise KeyboardInterrupt
    return 1 if report.refused else 0


def _say_reconnects() -> None:
    """Print the consumer's reconnect lines on stderr (the CLI logs nothing else)."""
    if _DRIVER_LOG.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("dejaq: %(message)s"))
    _DRIVER_LOG.addHandler(handler)
    _DRIVER_LOG.setLevel(logging.INFO)
    _DRIVER_LOG.propagate = False
