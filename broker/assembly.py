"""One broker assembled from its config: storage and its clock, the coordinator,
the gRPC server with health and reflection, the metrics endpoint and the
background tasks; started, and taken apart again in order.

``server.serve`` runs one as a process (signals, the lines scripts read);
``dejaq.driver.embedded`` runs one inside an application's event loop.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2_grpc
from grpc_health.v1._async import HealthServicer
from grpc_reflection.v1alpha import reflection

from dejaq.broker.api.requests import add_to_server
from dejaq.broker.api.service import TimelineService
from dejaq.broker.api.topics import TopicCache
from dejaq.broker.bridges import runs as bridge_runs
from dejaq.broker.clock.guard import ClockGuard, guard_forever
from dejaq.broker.clock.guarded import GuardedClock
from dejaq.broker.clock.storage_clock import StorageClock, storage_clock
from dejaq.broker.cluster.etcd_coordinator import EtcdCoordinator
from dejaq.broker.cluster.events import BrokerEvents
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import Coordinator, LocalCoordinator
from dejaq.broker.cron.firers import CronFirers
from dejaq.broker.http.app import HttpEndpoint, serve_http
from dejaq.broker.http.lease_tokens import Signer
from dejaq.broker.http.route import Surface
from dejaq.broker.observability import due_ahead, gauges, health
from dejaq.broker.observability.budget import refresh_forever
from dejaq.broker.observability.metrics_endpoint import MetricsEndpoint, serve_metrics, tls_context
from dejaq.broker.outbox import relays as outbox_relays
from dejaq.broker.retention import sweep_forever
from dejaq.broker.security.guard import Guard
from dejaq.broker.security.tls import ServerTls
from dejaq.broker.storage_open import open_storage
from dejaq.broker.webhooks.hooks import WebhookPosters
from dejaq.core.clock import Clock, WallClock
from dejaq.core.errors import InvalidArgument
from dejaq.core.wire.frames import MAX_FRAME_BYTES
from dejaq.storage_plugins.base import Storage

# The shortest interval between a client's pings the broker accepts; more often
# and it answers GOAWAY (too many pings). The driver pings every 10 s.
MIN_CLIENT_PING_MS = 5_000


@dataclass
class RunningBroker:
    """A started broker: what serves, and what its stop takes apart."""

    config: BrokerConfig
    context: BrokerContext
    port: int
    guard: Guard
    tls: ServerTls | None
    metrics_endpoint: MetricsEndpoint | None
    http_endpoint: HttpEndpoint | None
    _server: grpc.aio.Server
    _health: HealthServicer
    _cron: CronFirers
    _posters: WebhookPosters
    _background: list[asyncio.Task[None]]

    async def stop(self) -> None:
        """Stop serving (streams get ``grace_s`` to finish), then the cron
        firers, the webhook posters, the coordinator, the dispatchers and storage,
        in that order."""
        await self._health.enter_graceful_shutdown()
        if self.http_endpoint is not None:
            await self.http_endpoint.stop()
        for task in self._background:
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        if self.metrics_endpoint is not None:
            await self.metrics_endpoint.stop()
        await self._server.stop(self.config.grace_s)
        await self._cron.stop()
        await self._posters.stop()
        await self.context.coordinator.stop()
        for d in list(self.context.dispatchers.values()):
            await d.stop()
        await self.context.storage.close()


async def start(config: BrokerConfig) -> RunningBroker:
    """Assemble and start a broker; a bad TLS file, auth file, storage URL or
    listen address stops it before it serves, with nothing left open. A
    storage not ready yet is waited for (``storage_open``)."""
    # TLS files and the auth file are checked before anything is opened.
    tls = ServerTls.from_config(config)
    guard = Guard.from_file(config.auth)
    metrics_tls = tls_context(config)  # a bad certificate stops the broker before it starts
    storage = await open_storage(config.storage)
    try:
        return await _start_over(config, storage, tls, guard, metrics_tls)
    except BaseException:
        await storage.close()
        raise


async def _start_over(
    config: BrokerConfig,
    storage: Storage,
    tls: ServerTls | None,
    guard: Guard,
    metrics_tls: ssl.SSLContext | None,
) -> RunningBroker:
    clock = await storage_clock(storage, config.clock_sync_ms)  # the storage server's, if any
    skew_guard = None
    if clock is None and config.etcd and config.skew_max_ms:
        # Brokers' own clocks decide (embedded storage): guard against one that
        # is off, or that steps, at its next reading.
        skew_guard = ClockGuard(config.skew_max_ms)
    broker = BrokerContext(
        config,
        storage,
        coordinator_for(config, storage),
        TopicCache(storage),
        clock=_own_clock(clock, skew_guard),
        guard=skew_guard,
    )
    if clock is not None:
        clock.on_sync = broker.metrics.storage_clock_synced
        broker.metrics.storage_clock_synced(clock.offset_ms / 1000, clock.uncertainty_us / 1e6)
    if skew_guard is not None:
        skew_guard.on_change = broker.clock_guard_changed
        broker.clock_guard_changed(skew_guard.paused)
    storage.on_operation = broker.metrics.storage_op
    cron = CronFirers(broker)
    broker.cron = cron
    posters = WebhookPosters(broker)
    broker.webhooks = posters
    server = grpc.aio.server(options=server_options(config))
    service = TimelineService(broker, guard)
    add_to_server(service, server)
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
        raise OSError(f"cannot listen on {config.listen}: {exc}") from exc
    # Join the cluster (etcd) before serving: a broker that cannot, does not start.
    await broker.coordinator.start(advertised_address(config, port), BrokerEvents(broker))
    await server.start()
    http = None
    if config.http:
        http_tls = tls.ssl_context() if tls is not None else None
        try:
            surface = Surface(broker, guard, Signer(broker.coordinator.shared_secret()))
            http = await serve_http(surface, config.http, http_tls)
        except BaseException:
            await server.stop(None)
            await broker.coordinator.stop()
            raise
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
        asyncio.create_task(
            refresh_forever("gauge", lambda: gauges.refresh(broker), config.metrics_refresh_ms)
        ),
        asyncio.create_task(
            refresh_forever(
                "due-ahead", lambda: due_ahead.refresh(broker), config.metrics_refresh_ms
            )
        ),
        asyncio.create_task(cron.run_forever()),
        asyncio.create_task(posters.run_forever()),
        *outbox_relays.start(broker),
        *bridge_runs.start(broker, port),
    ]
    if clock is not None:
        background.append(asyncio.create_task(clock.run_forever()))
    elif skew_guard is not None:
        view = broker.coordinator.view
        background.append(asyncio.create_task(guard_forever(skew_guard, view)))
    endpoint = None
    if config.metrics:
        endpoint = await serve_metrics(config, broker.metrics.registry, metrics_tls)
    return RunningBroker(
        config,
        broker,
        port,
        guard,
        tls,
        endpoint,
        http,
        server,
        health_servicer,
        cron,
        posters,
        background,
    )


def _own_clock(storage: StorageClock | None, guard: ClockGuard | None) -> Clock:
    """The clock that decides: the storage server's; else this host's, watched
    for steps when a skew guard judges it."""
    if storage is not None:
        return storage
    return WallClock() if guard is None else GuardedClock(guard)


def _guarded(broker: BrokerContext) -> bool:
    """Whether the skew guard holds dispatch back now."""
    return broker.guard is not None and broker.guard.paused


def coordinator_for(config: BrokerConfig, storage: Storage) -> Coordinator:
    """etcd when ``--etcd`` is given, else the single-broker coordinator. A
    cluster needs a storage its brokers share: ``memory://`` is refused."""
    if not config.etcd:
        return LocalCoordinator()
    if not storage.shared:
        scheme = config.storage.partition(":")[0]
        raise InvalidArgument(
            f"--etcd needs a storage every broker of the cluster shares, not {scheme}://"
            " (it lives inside one broker: messages produced through it would be"
            " stranded there); use sqlite:///PATH (brokers on one host), redis:// or"
            " postgresql://"
        )
    return EtcdCoordinator.from_config(config, storage)


def advertised_address(config: BrokerConfig, port: int) -> str:
    """The HOST:PORT other brokers and clients reach this broker at."""
    if config.advertise:
        return config.advertise
    host = config.listen.rpartition(":")[0]
    if host in ("", "0.0.0.0", "::", "[::]"):
        host = socket.gethostname()  # a wildcard is no address to give others
    return f"{host}:{port}"


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
