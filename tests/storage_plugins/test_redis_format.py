"""The stored format's version on ``redis://`` and ``redis+cluster://``: a new
store is marked with this layout's version, and a broker refuses a store of a
version it cannot read, before touching anything."""

from __future__ import annotations

import pytest

from dejaq.core.errors import StorageError
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.redis import keys as redis_keys
from tests.redis_cluster import RedisCluster
from tests.redis_server import RedisServer


@pytest.fixture(params=["redis", "redis-cluster"])
def store(request: pytest.FixtureRequest) -> tuple[str, RedisServer | RedisCluster]:
    """An empty store's URL, and its server (or cluster)."""
    if request.param == "redis":
        server: RedisServer = request.getfixturevalue("redis_server")
        server.flush()
        return server.url, server
    cluster: RedisCluster = request.getfixturevalue("redis_cluster")
    cluster.flush()
    return cluster.url, cluster


def _format(store: RedisServer | RedisCluster) -> bytes | None:
    node = store if isinstance(store, RedisServer) else store.master_of(redis_keys.FORMAT)
    with node.client() as client:
        value: bytes | None = client.get(redis_keys.FORMAT)
        return value


def _set_format(store: RedisServer | RedisCluster, version: str) -> None:
    node = store if isinstance(store, RedisServer) else store.master_of(redis_keys.FORMAT)
    with node.client() as client:
        client.set(redis_keys.FORMAT, version)


async def test_a_new_store_is_marked_with_this_layout_s_version(
    store: tuple[str, RedisServer | RedisCluster],
) -> None:
    url, server = store
    storage = storage_from_url(url)
    await storage.open()
    await storage.close()
    assert _format(server) == str(redis_keys.FORMAT_VERSION).encode()


async def test_a_store_of_another_version_is_refused_at_open(
    store: tuple[str, RedisServer | RedisCluster],
) -> None:
    # Given a store written by a dejaq of another stored format
    url, server = store
    _set_format(server, "2")
    # When a broker opens it, then it refuses, naming both versions
    storage = storage_from_url(url)
    with pytest.raises(StorageError, match=r"format version '2'.*reads version 1"):
        await storage.open()
    # And the store was left as it was
    assert _format(server) == b"2"
