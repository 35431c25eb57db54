"""Servers the deploy stories run against: the session's etcd, and a Redis of each
test's own with an append-only file, as the chart's bundled one keeps (tests may
cut it away and bring it back)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.redis_server import RedisServer
from tests.servers import require_binary, running, temporary_root


@pytest.fixture
def redis() -> Iterator[RedisServer]:
    server = RedisServer(require_binary("redis-server"), temporary_root("redis"), persistent=True)
    with running(server) as started:
        yield started
