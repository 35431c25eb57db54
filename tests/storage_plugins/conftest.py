"""The ``storage`` fixture: every conformance test runs once per backend.

Each backend is built lazily from a URL, so a backend whose server is missing
skips only its own cases. To add a served backend (Redis, PostgreSQL, ...):
write a session fixture that starts the server on loopback after
``tests.servers.require_binary("redis-server")`` (skipped locally, failed
under ``CI=true``), then add a URL factory here that asks for it with
``request.getfixturevalue(...)`` and flushes it for the test.

``two_storages`` opens two instances on one store, as two brokers would have,
for every backend whose store can be shared (``SHARED``: not ``memory://``,
which lives in one process).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from dejaq.storage_plugins import Storage, storage_from_url
from tests.postgres_server import PostgresServer
from tests.redis_cluster import RedisCluster
from tests.redis_sentinel import RedisSentinel
from tests.redis_server import RedisServer
from tests.servers import require_binary

UrlFactory = Callable[[pytest.FixtureRequest, Path], str]


def _memory(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return "memory://"


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'dejaq.db'}"


def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    server: PostgresServer = request.getfixturevalue("postgres_server")
    server.reset()
    return server.url()


def _redis(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    server: RedisServer = request.getfixturevalue("redis_server")
    server.flush()
    return server.url


def _redis_cluster(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    cluster: RedisCluster = request.getfixturevalue("redis_cluster")
    cluster.flush()
    return cluster.url


def _redis_sentinel(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    group: RedisSentinel = request.getfixturevalue("redis_sentinel")
    group.flush()
    return group.url


BACKENDS: dict[str, UrlFactory] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "postgres": _postgres,
    "redis": _redis,
    "redis-cluster": _redis_cluster,
    "redis-sentinel": _redis_sentinel,
}


@pytest.fixture(params=list(BACKENDS))
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    """An opened, empty backend; closed after the test."""
    backend = storage_from_url(BACKENDS[request.param](request, tmp_path))
    await backend.open()
    try:
        yield backend
    finally:
        await backend.close()


# Backends whose store two Storage instances (two brokers) can share.
SHARED = ("sqlite", "postgres", "redis", "redis-cluster", "redis-sentinel")


@pytest.fixture(params=SHARED)
async def two_storages(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Storage, Storage]]:
    """Two opened instances of one backend on one empty store; closed after the test."""
    url = BACKENDS[request.param](request, tmp_path)
    async with contextlib.AsyncExitStack() as stack:
        pair = []
        for _ in range(2):
            backend = storage_from_url(url)
            await backend.open()
            stack.push_async_callback(backend.close)
            pair.append(backend)
        yield pair[0], pair[1]


@pytest.fixture
def server(redis_server: RedisServer) -> RedisServer:
    """The session's server, emptied."""
    redis_server.flush()
    return redis_server


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A server of this test alone, which it may kill."""
    root = Path(tempfile.mkdtemp(prefix="dejaq-redis-own-"))
    server = RedisServer(require_binary("redis-server"), root)
    server.start()
    try:
        yield server
    finally:
        server.kill()
