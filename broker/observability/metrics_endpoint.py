"""Serve /metrics on ``--metrics HOST:PORT``: plain HTTP, or HTTPS with
``--metrics-tls-cert`` / ``--metrics-tls-key`` (and ``--metrics-tls-client-ca``
to require a client certificate from scrapers).

prometheus_client's aiohttp handler answers, on an aiohttp server with an
event loop of its own in one thread: a scrape renders every series at once
(about 50 ms for 100 topics, seconds for thousands), which in the broker's
loop would hold every delivery back that long. A TLS handshake is asyncio's,
so a client that connects and says nothing holds up only its own connection.
"""

from __future__ import annotations

import asyncio
import ssl
import threading

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from dejaq.broker.config import BrokerConfig
from dejaq.core.errors import InvalidArgument


class MetricsEndpoint:
    """A running /metrics server; ``stop`` shuts it down and ends its thread."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, thread: threading.Thread, runner: web.AppRunner
    ) -> None:
        self._loop = loop
        self._thread = thread
        self._runner = runner
        self.url = ""

    async def stop(self) -> None:
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
        )
        self._loop.call_soon_threadsafe(self._loop.stop)
        await asyncio.to_thread(self._thread.join)


async def serve_metrics(
    config: BrokerConfig, registry: CollectorRegistry, tls: ssl.SSLContext | None
) -> MetricsEndpoint:
    """Serve ``registry`` where ``config.metrics`` says; over HTTPS with ``tls``
    (``tls_context``, built before anything else starts)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=_run, args=(loop,), name="metrics", daemon=True)
    thread.start()
    app = web.Application()
    app.router.add_get("/metrics", make_aiohttp_handler(registry))
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    endpoint = MetricsEndpoint(loop, thread, runner)
    started = asyncio.run_coroutine_threadsafe(_start(runner, config.metrics, tls), loop)
    try:
        endpoint.url = await asyncio.wrap_future(started)
    except BaseException:
        await endpoint.stop()
        raise
    return endpoint


def _run(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()


async def _start(runner: web.AppRunner, address: str, tls: ssl.SSLContext | None) -> str:
    """Start serving on ``address`` (in the endpoint's own loop); its URL."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    await runner.setup()
    site = web.TCPSite(runner, host, int(port), ssl_context=tls)
    try:
        await site.start()
    except OSError as exc:
        raise OSError(f"cannot serve /metrics on {address}: {exc.strerror or exc}") from exc
    bound = runner.addresses[0][1] if runner.addresses else int(port)
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{bound}/metrics"


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
