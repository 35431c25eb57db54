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
from prometheus_client import start_http_server

from dejaq.broker import health
from dejaq.broker.cluster.events import BrokerEvents
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import advertised_address, coordinator_for
from dejaq.broker.cron.firers import CronFirers
from dejaq.broker.gauges import refresh_forever
from dejaq.broker.retention import sweep_forever
from dejaq.broker.service import TimelineService
from dejaq.broker.topics import TopicCache
from dejaq.core.wire.frames import MAX_FRAME_BYTES
from dejaq.proto import dejaq_pb2_grpc as pb_grpc
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

    storage = storage_from_url(config.storage)
    await storage.open()
    broker = BrokerContext(config, storage, coordinator_for(config, storage), TopicCache(storage))
    storage.on_operation = broker.metrics.storage_op
    broker.cron = CronFirers(broker)
    server = grpc.aio.server(options=server_options(config))
    pb_grpc.add_TimelineServicer_to_server(TimelineService(broker), server)
    health_servicer = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (*health.SERVICES[1:], "grpc.health.v1.Health", reflection.SERVICE_NAME), server
    )
    try:
        port = server.add_insecure_port(config.listen)
    except RuntimeError as exc:
        await storage.close()
        raise OSError(f"cannot listen on {config.listen}: {exc}") from exc
    try:  # join the cluster (etcd) before serving: a broker that cannot, does not start
        await broker.coordinator.start(advertised_address(config, port), BrokerEvents(broker))
    except BaseException:
        await storage.close()
        raise
    await server.start()
    await health.set_status(health_servicer, True)
    await health.set_alive(health_servicer)
    background = [
        asyncio.create_task(sweep_forever(storage, config.retention_sweep_ms)),
        asyncio.create_task(health.monitor(storage, health_servicer, broker.metrics)),
        asyncio.create_task(refresh_forever(broker, config.metrics_refresh_ms)),
        asyncio.create_task(broker.cron.run_forever()),
    ]
    metrics_server = None
    if config.metrics:
        mhost, _, mport = config.metrics.rpartition(":")
        metrics_server, _ = start_http_server(int(mport), mhost, broker.metrics.registry)
        print(f"dejaq metrics on http://{mhost}:{metrics_server.server_port}/metrics", flush=True)
    # Everything built so far lives as long as the broker: keep it out of the
    # collector's full passes, which otherwise walk it every few seconds under
    # load and stall dispatch for milliseconds each time.
    gc.collect()
    gc.freeze()
    host = config.listen.rpartition(":")[0]
    # Tests and scripts read this line to learn the port (--listen HOST:0).
    print(f"dejaq broker listening on {host}:{port} (storage {config.storage})", flush=True)
    log.info("serving on %s:%d", host, port)
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        await health_servicer.enter_graceful_shutdown()
        for task in background:
            task.cancel()
        if metrics_server is not None:
            metrics_server.shutdown()
        await server.stop(config.grace_s)
        await broker.cron.stop()
        await broker.coordinator.stop()
        for d in list(broker.dispatchers.values()):
            await d.stop()
        await storage.close()
        print("dejaq broker stopped", file=sys.stderr, flush=True)


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
