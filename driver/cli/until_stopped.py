"""What the commands that run until SIGTERM share (``dejaq bridge run``,
``dejaq outbox relay``): their ``--metrics HOST:PORT`` served, and a client of
``--broker`` handed to their work with the event a signal sets."""

from __future__ import annotations

import argparse
import asyncio
import signal
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from dejaq.core.errors import InvalidArgument
from dejaq.driver.cli.common import connect
from dejaq.driver.client import Client

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry


def add_metrics(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", help="HOST:PORT to serve Prometheus /metrics on (default: off)")


def metrics_address(text: str) -> tuple[str, int]:
    """``--metrics HOST:PORT`` as (host, port); with no host, the loopback's."""
    host, _, port = text.rpartition(":")
    if not port.isdigit():
        raise InvalidArgument(f"--metrics {text!r} is not HOST:PORT")
    return host or "127.0.0.1", int(port)


def serve_metrics(text: str | None, registry: CollectorRegistry) -> None:
    """Serve ``registry`` at /metrics on ``--metrics``, when it is given."""
    if not text:
        return
    from prometheus_client import start_http_server

    host, port = metrics_address(text)
    start_http_server(port, host, registry=registry)


def run_until_signal(
    args: argparse.Namespace, work: Callable[[Client, asyncio.Event], Awaitable[None]]
) -> int:
    """Run ``work`` with a client of ``--broker`` and an event that SIGTERM or
    SIGINT sets; it returns once ``work`` does."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with connect(args) as client:
            await work(client, stop)

    asyncio.run(main())
    return 0
