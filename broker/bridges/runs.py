"""The bridges of ``--bridges``, one task each, through a client of this broker
on loopback (the bridges consume their topics as any consumer does)."""

from __future__ import annotations

import asyncio
import contextlib

from dejaq.bridges import config
from dejaq.bridges.metrics import BridgeMetrics
from dejaq.bridges.runner import Bridge
from dejaq.broker.context import BrokerContext
from dejaq.driver.client import Client

ANY_ADDRESS = ("", "0.0.0.0", "::", "[::]")


def start(broker: BrokerContext, port: int) -> list[asyncio.Task[None]]:
    """A task running every bridge of the broker's config (none without
    ``--bridges``), its metrics in the broker's registry."""
    if not broker.config.bridges:
        return []
    specs = config.load(broker.config.bridges)
    return [asyncio.create_task(_run(specs, _address(broker.config.listen, port), broker))]


async def _run(specs: list[config.BridgeSpec], address: str, broker: BrokerContext) -> None:
    metrics = BridgeMetrics(broker.metrics.registry)
    client = Client(address, timeout_s=30.0, tls=False)
    bridges = [Bridge(spec, client, metrics) for spec in specs]
    try:
        await asyncio.gather(*(bridge.run() for bridge in bridges))
    finally:
        with contextlib.suppress(Exception):  # the broker is stopping: nothing to report
            await client.close()


def _address(listen: str, port: int) -> str:
    host = listen.rpartition(":")[0]
    return f"{'127.0.0.1' if host in ANY_ADDRESS else host}:{port}"
