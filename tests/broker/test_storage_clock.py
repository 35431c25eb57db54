"""The storage clock: brokers on Redis or PostgreSQL read the server's time,
never ahead of it; embedded storage has no clock of its own."""

from __future__ import annotations

import pytest

from dejaq.broker.clock.storage_clock import storage_clock
from dejaq.storage_plugins import Storage, storage_from_url
from dejaq.storage_plugins.memory import MemoryStorage
from tests.postgres_server import PostgresServer
from tests.redis_cluster import RedisCluster
from tests.redis_server import RedisServer
from tests.servers import require_binary


@pytest.fixture(params=["redis", "redis-cluster", "postgres"])
async def served(request: pytest.FixtureRequest) -> Storage:
    if request.param == "redis":
        require_binary("redis-server")
        redis: RedisServer = request.getfixturevalue("redis_server")
        url = redis.url
    elif request.param == "redis-cluster":
        cluster: RedisCluster = request.getfixturevalue("redis_cluster")
        url = cluster.url
    else:
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        url = pg.url()
    storage = storage_from_url(url)
    await storage.open()
    return storage


async def test_the_clock_never_reads_ahead_of_the_storage_server(served: Storage) -> None:
    try:
        # Given a clock synced with the server
        clock = await storage_clock(served, refresh_ms=1_000)
        assert clock is not None
        for _ in range(50):
            # When it is read just before the server is asked
            mine = clock.now_ms()
            server_ms = (await served.server_time_us() or 0) // 1000
            # Then it is never after the server's time, and close behind it
            assert mine <= server_ms
            assert server_ms - mine < 50
        # and a refresh keeps it so, and reports the offset (this host's clock
        # is the server's here) and its uncertainty
        synced: list[tuple[float, float]] = []
        clock.on_sync = lambda offset_s, uncertainty_s: synced.append((offset_s, uncertainty_s))
        await clock.sync()
        assert clock.now_ms() <= (await served.server_time_us() or 0) // 1000
        [(offset_s, uncertainty_s)] = synced
        assert abs(offset_s) < 0.05 and 0 < uncertainty_s < 0.05
    finally:
        await served.close()


async def test_embedded_storage_has_no_clock_of_its_own() -> None:
    assert await storage_clock(MemoryStorage(), refresh_ms=1_000) is None
