"""Serve /metrics on ``--metrics HOST:PORT``: plain HTTP, or HTTPS with
``--metrics-tls-cert`` / ``--metrics-tls-key`` (and ``--metrics-tls-client-ca``
to require a client certificate from scrapers).

prometheus_client's aiohttp handler answers, on an aiohttp server of its own
port in the broker's event loop (as the HTTP/JSON API's): no thread. A TLS
handshake is asyncio's, so a client that connects and says nothing holds up
only its own connection, never the other scrapes.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from dejaq.broker.config import BrokerConfig
from dejaq.core.errors import InvalidArgument


@dataclass
class MetricsEndpoint:
    """A running /metrics server; ``stop`` shuts it down."""

    runner: web.AppRunner
    url: str

    async def stop(self) -> None:
        await self.runner.cleanup()


async def serve_metrics(
    config: BrokerConfig, registry: CollectorRegistry, tls: ssl.SSLContext | None
) -> MetricsEndpoint:
    """Serve ``registry`` where ``config.metrics`` says; over HTTPS with ``tls``
    (``tls_context``, built before anything else starts)."""
    host, _, port = config.metrics.rpartition(":")
    host = host.strip("[]")
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, int(port), ssl_context=tls)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise OSError(f"cannot serve /metrics on {config.metrics}: {exc.strerror or exc}") from exc
    bound = runner.addresses[0][1] if runner.addresses else int(port)
    shown = f"[{host}]" if ":" in host else host
    return MetricsEndpoint(runner, f"{'https' if tls else 'http'}://{shown}:{bound}/metrics")


def tls_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The endpoint's TLS settings (None: plain HTTP); ``InvalidArgument`` names
    a certificate, key or CA that cannot be loaded."""
    if not (config.metrics and config.metrics_tls_cert):
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert, key, ca = config.metrics_tls_cert, config.metrics_tls_key, config.metrics_tls_client_ca
    try:
        context.load_cert_chain(cert, key)
        if ca:
            context.load_verify_locations(ca)
            context.verify_mode = ssl.CERT_REQUIRED
    except OSError as exc:  # ssl.SSLError too
        raise InvalidArgument(
            f"metrics TLS: cannot load certificate {cert!r}, key {key!r}"
            + (f" or client CA {ca!r}" if ca else "")
            + f": {exc}"
        ) from None
    return context
