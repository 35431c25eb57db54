"""A throwaway Redis server from the real binary, for tests and benchmarks.

``redis-server`` on a free loopback port with no persistence (``--save ""
--appendonly no``) and its working folder in a temporary directory. ``start``
waits until PING answers, under a deadline; ``kill`` and ``start`` again on the
same port let a test cut the server away and bring it back.

The session fixture ``redis_server`` yields the running server; the storage
URL factory calls ``flush`` (FLUSHALL) so each test starts empty.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from tests.servers import LocalServer, free_port, require_binary, running, temporary_root


@dataclass
class RedisServer(LocalServer):
    """One ``redis-server`` process on ``port``, restartable on the same port."""

    name = "redis-server"
    start_timeout_s = 10.0
    binary: str
    root: Path
    port: int = field(default_factory=free_port)
    persistent: bool = False  # AOF with fsync on every write: survives a restart

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.root / "redis.log"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2)

    def _launch(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else []
        args += ["--save", "", "--appendonly", "no", *aof, "--dir", str(self.root)]
        args += ["--logfile", str(self.log)]
        self._spawn(args)

    def ready(self) -> bool:
        """PING answers."""
        try:
            with self.client() as client:
                return bool(client.ping())
        except redis.ConnectionError:
            return False

    def flush(self) -> None:
        """Empty every database (FLUSHALL); loaded scripts stay."""
        with self.client() as client:
            client.flushall()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A running server for the whole session (skipped locally when the binary is missing)."""
    binary = require_binary("redis-server")
    with running(RedisServer(binary, temporary_root("redis"))) as server:
        yield server
