"""``dejaq outbox install|status|relay URL``: the transactional outbox in an
application's own PostgreSQL."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from typing import Any

from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact
from dejaq.driver.cli.common import add_broker, emit
from dejaq.driver.cli.until_stopped import add_metrics, run_until_signal, serve_metrics
from dejaq.driver.client import Client


def register(sub: Any) -> None:
    outbox = sub.add_parser("outbox", help="the transactional outbox in an application's database")
    osub = outbox.add_subparsers(dest="outbox_command", required=True, metavar="COMMAND")
    p = osub.add_parser(
        "install",
        help="create or upgrade the outbox schema",
        description="Create the dejaq_outbox schema in the application's PostgreSQL at URL,"
        " or upgrade an older one; run again, it changes nothing.",
    )
    p.add_argument("url", metavar="URL", help="the application's database, postgresql://...")
    p.set_defaults(run=install)
    p = osub.add_parser(
        "status",
        help="rows waiting, the oldest one's age, the parked rows",
        description="Show what waits in the outbox at URL and the rows parked there, with"
        " their reasons.",
    )
    p.add_argument("url", metavar="URL", help="the application's database, postgresql://...")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument("--limit", type=int, default=20, help="parked rows listed (default 20)")
    p.set_defaults(run=status)
    p = osub.add_parser(
        "relay",
        help="hand committed outbox rows to dejaq until SIGTERM",
        description="Relay the outbox at URL to the brokers: committed rows in commit order,"
        " woken by LISTEN/NOTIFY with a polling fallback. Several relays may share an outbox.",
    )
    p.add_argument("url", metavar="URL", help="the application's database, postgresql://...")
    add_broker(p)
    p.add_argument("--batch", type=int, default=500, help="rows a batch (default 500)")
    p.add_argument(
        "--poll-ms", type=int, default=500, help="look for rows this often unwoken (default 500)"
    )
    add_metrics(p)
    p.add_argument(
        "--once",
        action="store_true",
        help="relay what is committed now, say how many rows, and exit (a catch-up, a check)",
    )
    p.set_defaults(run=relay)


def install(args: argparse.Namespace) -> int:
    from dejaq import outbox

    done = outbox.install(args.url)
    where = redact(args.url)
    if done.before == done.after:
        print(f"{where}: outbox at version {done.after} already")
    elif done.before is None:
        print(f"{where}: outbox installed, version {done.after}")
    else:
        print(f"{where}: outbox upgraded from version {done.before} to {done.after}")
    return 0


def status(args: argparse.Namespace) -> int:
    from dejaq import outbox

    found = outbox.status(args.url, args.limit)
    if args.json:
        emit(
            {
                "waiting": found.waiting,
                "oldest_age_s": found.oldest_age_s,
                "parked": found.parked,
                "parked_rows": [vars(row) for row in found.parked_rows],
            }
        )
        return 0
    age = "-" if found.oldest_age_s is None else f"{found.oldest_age_s:.3f} s"
    print(f"waiting: {found.waiting}  oldest: {age}  parked: {found.parked}")
    for row in found.parked_rows:
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(row.parked_at_s))
        print(f"parked {row.seq} {row.op} {row.topic}/{row.id} at {when}: {row.reason}")
    return 0


def relay(args: argparse.Namespace) -> int:
    from dejaq.outbox.connect import database_errors
    from dejaq.outbox.driver_handoff import DriverHandOff
    from dejaq.outbox.relay import Relay, RelayMetrics

    for flag, value in (("--batch", args.batch), ("--poll-ms", args.poll_ms)):
        if value < 1:
            raise InvalidArgument(f"{flag} {value} must be 1 or more")
    metrics = RelayMetrics()
    serve_metrics(args.metrics, metrics.registry)

    async def work(client: Client, stop: asyncio.Event) -> None:
        if args.once:
            once = Relay(args.url, DriverHandOff(client), batch=args.batch, metrics=metrics)
            try:
                with database_errors(args.url):
                    done = await once.drain()
            finally:
                await once.close()
            print(f"relayed {done} rows")
            return
        relay = Relay(
            args.url,
            DriverHandOff(client),
            batch=args.batch,
            poll_ms=args.poll_ms,
            metrics=metrics,
        )
        runner = asyncio.create_task(relay.run(stop))
        await stop.wait()
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner

    return run_until_signal(args, work)
