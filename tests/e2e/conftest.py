"""Fixtures that run a real broker process: ``dejaq broker`` on loopback.

One broker per storage backend is started lazily for the whole session and
shared; every test works on topics of its own (``topic_name``), so tests never
see each other's messages. Tests that kill a broker start their own with
``start_broker``.
"""

from __future__ import annotations

import re
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import grpc
import pytest

from dejaq.driver.client import Client
from dejaq.proto import dejaq_pb2_grpc as pb_grpc
from tests.e2e.broker_process import STORAGES, BrokerProcess, Brokers, StartBroker
from tests.e2e.webhook_sink import Sink
from tests.postgres_server import PostgresServer
from tests.redis_cluster import RedisCluster
from tests.redis_server import RedisServer


@pytest.fixture(scope="session")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Brokers]:
    running = Brokers(tmp_path_factory.mktemp("brokers"))
    try:
        yield running
    finally:
        codes = running.stop_all()
    # A broker that does not stop cleanly on SIGTERM is a finding of its own.
    assert all(code == 0 for code in codes.values()), f"broker exit codes: {codes}"


@pytest.fixture(params=STORAGES)
def broker(request: pytest.FixtureRequest, brokers: Brokers) -> BrokerProcess:
    """The shared broker of each storage backend: the test runs once per backend."""
    return brokers.get(request.param)


@pytest.fixture
def memory_broker(brokers: Brokers) -> BrokerProcess:
    """The shared in-memory broker, for tests whose point is not storage."""
    return brokers.get("memory")


@pytest.fixture
def start_broker(tmp_path: Path) -> Iterator[StartBroker]:
    """Start brokers of one's own (to kill them); all are stopped after the test."""
    started: list[BrokerProcess] = []

    def start(storage: str, **env: str) -> BrokerProcess:
        log = tmp_path / f"broker-{len(started)}.log"
        b = BrokerProcess(storage, log, env)
        started.append(b)
        return b.start()

    try:
        yield start
    finally:
        for b in started:
            b.stop()


@pytest.fixture
def refused_address() -> Iterator[str]:
    """An address where nothing listens: its port is held, never listened on."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        yield f"127.0.0.1:{held.getsockname()[1]}"


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name no other test uses."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", request.node.name).strip("-")[:60]
    return f"{base}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def client(broker: BrokerProcess) -> AsyncIterator[Client]:
    async with Client(broker.address) as c:
        yield c


@pytest.fixture
async def stub(memory_broker: BrokerProcess) -> AsyncIterator[pb_grpc.TimelineStub]:
    """A raw gRPC stub on the in-memory broker, for what the driver would never send."""
    async with grpc.aio.insecure_channel(memory_broker.address) as channel:
        yield pb_grpc.TimelineStub(channel)


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    """A webhook endpoint on loopback, answering on the test's event loop."""
    s = await Sink().start()
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture(params=STORAGES)
def storage(request: pytest.FixtureRequest) -> str:
    """A storage kind, for tests that need a broker with settings of its own."""
    return str(request.param)


@pytest.fixture(params=["redis", "redis-cluster", "postgres"])
def served_url(request: pytest.FixtureRequest) -> str:
    """An empty backend on the session's Redis server, Redis Cluster or PostgreSQL
    server, for a broker of the test's own (``start_broker``)."""
    return empty_served_store(request, str(request.param), "e2e")


def empty_served_store(request: pytest.FixtureRequest, backend: str, prefix: str) -> str:
    """The URL of an empty store on the session's server of ``backend`` (redis,
    redis-cluster or postgres: a database named ``prefix`` and a random tail)."""
    if backend == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        return server.url
    if backend == "redis-cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        cluster.flush()
        return cluster.url
    pg: PostgresServer = request.getfixturevalue("postgres_server")
    return pg.create_database(f"{prefix}_{uuid.uuid4().hex[:12]}")
