"""/metrics: prometheus_client's aiohttp handler, in a loop beside the broker's."""

from __future__ import annotations

import asyncio
import socket
import threading
import urllib.request
from collections.abc import Iterator

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector

from dejaq.broker.config import BrokerConfig
from dejaq.broker.observability.metrics_endpoint import serve_metrics


def _registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("dejaq_things", "Things counted", registry=registry).inc(3)
    return registry


async def test_a_scrape_gets_the_registry_as_prometheus_text() -> None:
    # Given /metrics served on a free loopback port
    registry = _registry()
    endpoint = await serve_metrics(BrokerConfig(metrics="127.0.0.1:0"), registry, None)
    try:
        assert endpoint.url.startswith("http://127.0.0.1:") and endpoint.url.endswith("/metrics")
        # When a scraper asks for it
        async with aiohttp.ClientSession() as session, session.get(endpoint.url) as reply:
            body = await reply.read()
            # Then it gets the registry in the text format, with its content type
            assert reply.status == 200
            assert reply.headers["Content-Type"] == CONTENT_TYPE_PLAIN_0_0_4
            assert body == generate_latest(registry)
            assert b"dejaq_things_total 3.0" in body
    finally:
        await endpoint.stop()


async def test_a_port_in_use_is_refused_naming_the_address() -> None:
    # Given a port another socket holds
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        address = f"127.0.0.1:{held.getsockname()[1]}"
        # Then /metrics cannot be served there, and the error says where
        with pytest.raises(OSError, match=f"cannot serve /metrics on {address}"):
            await serve_metrics(BrokerConfig(metrics=address), _registry(), None)


class _HeldRender(Collector):
    """A collector whose render waits until the test lets it go (at most 10 s)."""

    def __init__(self) -> None:
        self.rendering = threading.Event()
        self.release = threading.Event()
        self.released_in_time = False

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.rendering.set()
        self.released_in_time = self.release.wait(10)
        yield GaugeMetricFamily("dejaq_held", "A render held by the test", value=1)


async def test_a_slow_scrape_does_not_hold_up_the_brokers_loop() -> None:
    # Given /metrics over a registry whose render waits for this loop to release it
    registry = CollectorRegistry()
    held = _HeldRender()
    registry.register(held)
    held.rendering.clear()  # registering collected once, to learn the names
    endpoint = await serve_metrics(BrokerConfig(metrics="127.0.0.1:0"), registry, None)
    try:
        # When a scraper asks, and the render is under way
        scrape = asyncio.create_task(asyncio.to_thread(_get, endpoint.url))
        assert await asyncio.to_thread(held.rendering.wait, 10)
        # Then this loop still runs meanwhile: it lets the render go, and the scrape ends
        held.release.set()
        assert b"dejaq_held 1.0" in await scrape
        assert held.released_in_time
    finally:
        await endpoint.stop()


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=15) as reply:
        return bytes(reply.read())
