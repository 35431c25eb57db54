"""Run a broker as a process: serve until SIGTERM / SIGINT, reload TLS and
auth files on SIGHUP, and print the lines scripts and tests read."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys

from dejaq.broker import assembly, collector
from dejaq.broker.allocator import give_back_large_blocks
from dejaq.broker.config import BrokerConfig
from dejaq.broker.observability import tracing
from dejaq.broker.security.guard import Guard
from dejaq.broker.security.tls import ServerTls
from dejaq.core.redact import redact

log = logging.getLogger("dejaq.broker")


async def serve(config: BrokerConfig, stop: asyncio.Event | None = None) -> None:
    """Serve until ``stop`` is set or the process gets SIGTERM / SIGINT."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    # Set before the broker is built: its tracer is the provider's from the start.
    flush_spans = tracing.export_from_environment(config.trace_sample)
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    broker = await _start_unless_stopped(config, stop)
    if broker is None:
        print("dejaq broker stopped before it served", file=sys.stderr, flush=True)
        return
    if broker.tls is not None or config.auth:  # SIGHUP reads them again
        loop.add_signal_handler(signal.SIGHUP, _reload, broker.guard, broker.tls)
    if broker.metrics_endpoint is not None:
        print(f"dejaq metrics on {broker.metrics_endpoint.url}", flush=True)
    if broker.http_endpoint is not None:
        print(f"dejaq http on {broker.http_endpoint.url}", flush=True)
    # Everything built so far lives as long as the broker (collector.py).
    collector.settle()
    host = config.listen.rpartition(":")[0]
    # Tests and scripts read this line to learn the port (--listen HOST:0).
    print(
        f"dejaq broker listening on {host}:{broker.port} (storage {redact(config.storage)})",
        flush=True,
    )
    log.info("serving on %s:%d", host, broker.port)
    _log_security(config, broker.guard)
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        await broker.stop()
        if flush_spans is not None:
            await asyncio.to_thread(flush_spans)  # the spans of the last moments go out too
        print("dejaq broker stopped", file=sys.stderr, flush=True)


async def _start_unless_stopped(
    config: BrokerConfig, stop: asyncio.Event
) -> assembly.RunningBroker | None:
    """The started broker, or None when ``stop`` came first: a broker still
    waiting for its storage or its cluster stops on SIGTERM like a serving one."""
    starting = asyncio.ensure_future(assembly.start(config))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait((starting, stopping), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if starting.done():
        return starting.result()
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await starting
    return None


def _reload(guard: Guard, tls: ServerTls | None) -> None:
    guard.reload()
    if tls is not None:
        tls.reload()


def _log_security(config: BrokerConfig, guard: Guard) -> None:
    tls = "mutual TLS" if config.tls_client_ca else "TLS" if config.tls_cert else "plaintext"
    if guard.policy is None:
        log.warning("%s, no --auth: every caller may do everything (anonymous mode)", tls)
    else:
        log.info("%s, %d principals from %s", tls, len(guard.policy.principals), config.auth)


def run(config: BrokerConfig) -> None:
    # The process is the broker's alone: its allocator may be tuned for it.
    give_back_large_blocks()
    asyncio.run(serve(config))
