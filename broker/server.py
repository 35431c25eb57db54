"""Run a broker: open storage, serve gRPC, stop gracefully on SIGTERM / SIGINT."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import signal
import sys

import grpc
from grpc_health.v1 import health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from dejaq.broker import health
from dejaq.broker.clock_guard import ClockGuard, guard_forever
from dejaq.broker.cluster.events import BrokerEvents
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import advertised_address, coordinator_for
from dejaq.broker.cron.firers import CronFirers
from dejaq.broker.gauges import refresh_forever
from dejaq.broker.metrics_endpoint import serve_metrics, tls_context
from dejaq.broker.requests import add_to_server
from dejaq.broker.retention import sweep_forever
from dejaq.broker.security.guard import Guard
from dejaq.broker.security.tls import ServerTls
from dejaq.broker.service import TimelineService
from dejaq.broker.storage_clock import storage_clock
from dejaq.broker.topics import TopicCache
from dejaq.core.clock import WallClock
from dejaq.core.redact import redact
from dejaq.core.wire.frames import MAX_FRAME_BYTES
from dejaq.storage_plugins import storage_from_url

log = logging.getLogger("dejaq.broker")
# The shortest interval between a client's pings the broker accepts; more often
# and it answers GOAWAY (too many pings). The driver pings every 10 s.
MIN_CLIENT_PING_MS = 5_000


async def serve(config: BrokerConfig, stop: asyncio.Event | None = None) -> None:
    """Serve until ``stop`` is set or the process gets SIGTERM / SIGINT."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    # TLS files and the auth file are checked before anything is opened;
    # SIGHUP reads them again.
    tls = ServerTls.from_config(config)
    guard = Guard.from_file(config.auth)
    if tls is not None or config.auth:
        loop.add_signal_handler(signal.SIGHUP, _reload, guard, tls)

    metrics_tls = tls_context(config)  # a bad certificate stops the broker before it starts
    storage = storage_from_url(config.storage)
    await storage.open()
    try:  # one clock decides: the storage server's, when it has one
        clock = await storage_clock(storage, config.clock_sync_ms)
    except BaseException:
        await storage.close()
        raise
    broker = BrokerContext(
        config,
        storage,
        coordinator_for(config, storage),
        TopicCache(storage),
        clock=clock if clock is not None else WallClock(),
    )
    if clock is not None:
        clock.on_sync = broker.metrics.storage_clock_synced
        broker.metrics.storage_clock_synced(clock.offset_ms / 1000, clock.uncertainty_us / 1e6)
    if clock is None and config.etcd and config.skew_max_ms:
        # Brokers' own clocks decide (embedded storage): guard against one that is off.
        broker.guard = ClockGuard(config.skew_max_ms)
    storage.on_operation = broker.metrics.storage_op
    broker.cron = CronFirers(broker)
    server = grpc.aio.server(options=server_options(config))
    add_to_server(TimelineService(broker, guard), server)
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*health.SERVICES[1:], "grpc.health.v1.Health", reflection.SERVICE_NAME), server
    )
    try:
        if tls is None:
            port = server.add_insecure_port(config.listen)
        else:
            port = server.add_secure_port(config.listen, tls.credentials())
    except RuntimeError as exc:
        await storage.close()
        raise OSError(f"cannot listen on {config.listen}: {exc}") from exc
    try:  # join the cluster (etcd) before serving: a broker that cannot, does not start
        await broker.coordinator.start(advertised_address(config, port), BrokerEvents(broker))
    except BaseException:
        await storage.close()
        raise
    await server.start()
    if broker.guard is not None:
        # Judged at once: a lone broker serves now; one that joins others waits
        # until it has heard their clocks, and is not ready until then.
        broker.guard.update(broker.coordinator.view())
    ready = not _guarded(broker)
    await health.set_status(health_servicer, ready)
    await health.set_alive(health_servicer)
    background = [
        asyncio.create_task(sweep_forever(storage, config.retention_sweep_ms)),
        asyncio.create_task(
            health.monitor(
                storage,
                health_servicer,
                broker.metrics,
                clock_ok=lambda: not _guarded(broker),
                serving=ready,
            )
        ),
        asyncio.create_task(refresh_forever(broker, config.metrics_refresh_ms)),
        asyncio.create_task(broker.cron.run_forever()),
    ]
    if clock is not None:
        background.append(asyncio.create_task(clock.run_forever()))
    elif broker.guard is not None:
        view, changed = broker.coordinator.view, broker.clock_guard_changed
        background.append(asyncio.create_task(guard_forever(broker.guard, view, changed)))
    metrics_server = None
    if config.metrics:
        metrics_server = serve_metrics(config, broker.metrics.registry, metrics_tls)
        print(f"dejaq metrics on {metrics_server.url}", flush=True)
    # Everything built so far lives as long as the broker: keep it out of the
    # collector's full passes, which otherwise walk it every few seconds under
    # load and stall dispatch for milliseconds each time.
    gc.collect()
    gc.freeze()
    host = config.listen.rpartition(":")[0]
    # Tests and scripts read this line to learn the port (--listen HOST:0).
    print(f"dejaq broker listening on {host}:{port} (storage {redact(config.storage)})", flush=True)
    log.info("serving on %s:%d", host, port)
    _log_security(config, guard)
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        await health_servicer.enter_graceful_shutdown()
        for task in background:
            task.cancel()
        if metrics_server is not None:
            metrics_server.stop()
        await server.stop(config.grace_s)
        await broker.cron.stop()
        await broker.coordinator.stop()
        for d in list(broker.dispatchers.values()):
            await d.stop()
        await storage.close()
        print("dejaq broker stopped", file=sys.stderr, flush=True)


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


def _guarded(broker: BrokerContext) -> bool:
    """Whether the skew guard holds dispatch back now."""
    return broker.guard is not None and broker.guard.paused


def server_options(config: BrokerConfig) -> list[tuple[str, int]]:
    """Frame limits and keepalive: the broker pings each connection every
    ``keepalive_ms`` and closes it when a ping goes unanswered for
    ``keepalive_timeout_ms``, so a frozen or vanished client (half-open TCP)
    releases its stream in seconds, not after the kernel's hours."""
    return [
        ("grpc.max_receive_message_length", MAX_FRAME_BYTES),
        ("grpc.max_send_message_length", MAX_FRAME_BYTES),
        ("grpc.keepalive_time_ms", config.keepalive_ms),
        ("grpc.keepalive_timeout_ms", config.keepalive_timeout_ms),
        # This gRPC judges an unanswered ping by its own ping timeout, not by the above.
        ("grpc.http2.ping_timeout_ms", config.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", 1),
        ("grpc.http2.max_pings_without_data", 0),  # keep pinging an idle stream
        # Clients ping too (driver/client.py): allow it this often.
        ("grpc.http2.min_ping_interval_without_data_ms", MIN_CLIENT_PING_MS),
    ]


def run(config: BrokerConfig) -> None:
    asyncio.run(serve(config))
