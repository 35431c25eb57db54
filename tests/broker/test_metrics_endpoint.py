"""/metrics, served in the broker's event loop by prometheus_client's aiohttp handler."""

from __future__ import annotations

import socket

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

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
