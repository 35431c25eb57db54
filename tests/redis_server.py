"""A throwaway Redis server from the real binary, for tests and benchmarks.

``redis-server`` on a free loopback port with no persistence (``--save ""
--appendonly no``) and its working folder in a temporary directory. ``start``
waits until PING answers, under a deadline; ``kill`` and ``start`` again on the
same port let a test cut the server away and bring it back.

The session fixture ``redis_server`` yields the running server; the storage
URL factory calls ``flush`` (FLUSHALL) so each test starts empty.

Given ``tls`` (the session's test certificates) the server listens only on TLS
and asks clients for a certificate signed by the test CA; given ``password``
it wants that password (``requirepass``). ``url`` then is the ``rediss://``
URL a broker uses, with the CA, certificate and key as options.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from tests.certs import Certs
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
    tls: Certs | None = None  # TLS only, client certificates required
    password: str = ""

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        if self.tls is None:
            return f"redis://{auth}127.0.0.1:{self.port}/0"
        client = self.tls.client("redis-client")
        options = f"ssl_ca_certs={self.tls.ca}&ssl_certfile={client.cert}&ssl_keyfile={client.key}"
        return f"rediss://{auth}127.0.0.1:{self.port}/0?{options}"

    @property
    def log(self) -> Path:
        return self.root / "redis.log"

    def client(self) -> redis.Redis:
        tls = {}
        if self.tls is not None:
            client = self.tls.client("redis-client")
            tls = {"ssl_ca_certs": str(self.tls.ca), "ssl_certfile": str(client.cert)}
            tls |= {"ssl": True, "ssl_keyfile": str(client.key)}
        return redis.Redis(
            port=self.port,
            password=self.password or None,
            socket_timeout=2,
            socket_connect_timeout=2,
            **tls,
        )

    def _launch(self) -> None:
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        if self.tls is not None:
            args[2:3] = ["0", "--tls-port", str(self.port)]
            args += ["--tls-cert-file", str(self.tls.server.cert)]
            args += ["--tls-key-file", str(self.tls.server.key)]
            args += ["--tls-ca-cert-file", str(self.tls.ca), "--tls-auth-clients", "yes"]
        if self.password:
            args += ["--requirepass", self.password]
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else []
        args += ["--save", "", "--appendonly", "no", *aof, "--dir", str(self.root)]
        # A replica (a sentinel group's) syncs at once; by default a master waits
        # 5 s for more replicas to share one transfer.
        args += ["--repl-diskless-sync-delay", "0"]
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


@pytest.fixture(scope="session")
def tls_redis_server(certs: Certs) -> Iterator[RedisServer]:
    """A server that takes only TLS with a client certificate, and a password."""
    binary = require_binary("redis-server")
    password = "redis-s3cret-" + uuid.uuid4().hex[:8]
    with running(
        RedisServer(binary, temporary_root("redis-tls"), tls=certs, password=password)
    ) as s:
        yield s
