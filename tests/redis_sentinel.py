"""A throwaway Redis master and its replica watched by three sentinels, from the real binaries.

Two ``redis-server`` processes (``redis_server.RedisServer``: loopback, no
persistence), the second made a replica of the first with ``REPLICAOF``, then
three ``redis-server --sentinel`` processes monitoring the master as
``SERVICE`` with a quorum of two. ``start`` waits, under a deadline, until
``healthy``: every sentinel names the same master, sees it up and knows the two
other sentinels, and the master has its replica linked (so ``WAIT 1`` is
answered at once). One replica, so that with ``wait_replicas=1`` the replica
the sentinels promote is the one that acknowledged every write (with two,
Sentinel might promote the other: ``storage_plugins/redis/sentinel.py``).

``kill`` (SIGKILL, on ``master()``) and the sentinels promote a replica after
``DOWN_AFTER_MS``; ``rejoin`` starts the killed node again as a replica of the
new master, once every sentinel names that one (a node without persistence
must not come back as a master a sentinel still names: it would be empty).
The sentinels are started with their own config files, which they rewrite as
the group changes.

The session fixture ``redis_sentinel`` yields the running group; the storage
URL factory calls ``flush`` (FLUSHALL on the master) so each test starts empty.
``tls_redis_sentinel`` is a group that speaks only TLS with client
certificates: clients, replication and the sentinels' own links.
``auth_redis_sentinel`` is a group whose sentinels want a password
(``requirepass``, and ``sentinel sentinel-pass`` among themselves); its
master and replica want none.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis

from tests.certs import Certs
from tests.redis_process import RedisProcess, replica_links, text, until
from tests.redis_server import RedisServer
from tests.servers import free_port, require_binary, temporary_root

SERVICE = "dejaq-master"
REPLICAS = 1  # see above
SENTINELS = 3
QUORUM = 2
DOWN_AFTER_MS = 2000  # a loaded 2-core machine may keep a server from answering for 1 s
FAILOVER_TIMEOUT_MS = 10_000
READY_TIMEOUT_S = 60.0


@dataclass
class SentinelNode(RedisProcess):
    """One ``redis-server --sentinel`` on ``port``, its config file in ``root``."""

    name = "redis-sentinel"
    log_name = "sentinel.log"
    start_timeout_s = 10.0
    binary: str
    root: Path
    master_port: int
    port: int = field(default_factory=free_port)
    tls: Certs | None = None  # TLS only, its links to servers and sentinels too
    password: str = ""  # wanted from its clients and given to the other sentinels

    def _launch(self) -> None:
        config = self.root / "sentinel.conf"
        listen = f"port {self.port}\n"
        if self.tls is not None:
            listen = (
                f"port 0\ntls-port {self.port}\ntls-replication yes\ntls-auth-clients yes\n"
                f"tls-cert-file {self.tls.server.cert}\ntls-key-file {self.tls.server.key}\n"
                f"tls-ca-cert-file {self.tls.ca}\n"
            )
        if self.password:
            listen += f"requirepass {self.password}\nsentinel sentinel-pass {self.password}\n"
        config.write_text(
            f"{listen}bind 127.0.0.1\ndir {self.root}\nlogfile {self.log}\n"
            f"sentinel monitor {SERVICE} 127.0.0.1 {self.master_port} {QUORUM}\n"
            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
            f"sentinel parallel-syncs {SERVICE} {REPLICAS}\n"
        )
        self._spawn([self.binary, str(config), "--sentinel"])

    def master_state(self) -> dict[str, str]:
        """``SENTINEL MASTER SERVICE`` as text fields."""
        with self.client() as client:
            raw = client.execute_command("SENTINEL", "MASTER", SERVICE)
        if isinstance(raw, dict):
            return {text(k): text(v) for k, v in raw.items()}
        return {text(k): text(v) for k, v in zip(raw[::2], raw[1::2], strict=True)}


@dataclass
class RedisSentinel:
    """A master, ``REPLICAS`` replicas and ``SENTINELS`` sentinels on loopback."""

    binary: str
    root: Path
    tls: Certs | None = None
    sentinel_password: str = ""  # the sentinels' (the servers want none)
    servers: list[RedisServer] = field(default_factory=list)
    sentinels: list[SentinelNode] = field(default_factory=list)

    def __post_init__(self) -> None:
        for i in range(1 + REPLICAS):
            folder = self.root / f"redis-{i}"
            folder.mkdir()
            self.servers.append(RedisServer(self.binary, folder, tls=self.tls))
        master_port = self.servers[0].port
        for i in range(SENTINELS):
            folder = self.root / f"sentinel-{i}"
            folder.mkdir()
            self.sentinels.append(
                SentinelNode(
                    self.binary, folder, master_port, tls=self.tls, password=self.sentinel_password
                )
            )

    @property
    def url(self) -> str:
        """The storage URL: every sentinel, and the service."""
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        if self.tls is None:
            return f"redis+sentinel://{hosts}/{SERVICE}/0"
        options = urlsplit(self.servers[0].url).query  # the rediss:// URL's TLS options
        return f"rediss+sentinel://{hosts}/{SERVICE}/0?{options}"

    def _follow(self, server: RedisServer, master: RedisServer) -> None:
        """Make ``server`` a replica of ``master`` (over TLS in a TLS group)."""
        with server.client() as client:
            if self.tls is not None:
                client.config_set("tls-replication", "yes")
            client.execute_command("REPLICAOF", "127.0.0.1", master.port)

    def start(self) -> None:
        """The master, its replicas (linked), then the sentinels, which find them all."""
        master, *replicas = self.servers
        master.start()
        if self.tls is not None:  # it may be demoted: then it replicates over TLS too
            with master.client() as client:
                client.config_set("tls-replication", "yes")
        for replica in replicas:
            replica.start()
            self._follow(replica, master)
        self._until(lambda: self._linked(master), "the replicas did not link")
        for sentinel in self.sentinels:
            sentinel.start()
        self.wait_healthy()

    def master(self) -> RedisServer:
        """The server the sentinels name as master now."""
        port = int(self.sentinels[0].master_state()["port"])
        return next(s for s in self.servers if s.port == port)

    def promoted_everywhere(self, killed: RedisServer) -> bool:
        """Every sentinel names a master other than ``killed``: a client asking any
        of them can no longer be sent to it once it is back."""
        try:
            return all(int(s.master_state()["port"]) != killed.port for s in self.sentinels)
        except (redis.RedisError, OSError):
            return False

    def replicas(self) -> list[RedisServer]:
        master = self.master()
        return [s for s in self.servers if s is not master]

    def rejoin(self, server: RedisServer) -> None:
        """Start a killed server again, as a replica of the master named now. Only
        once every sentinel has promoted another: until its REPLICAOF it is an empty
        master, which a sentinel still naming it would send clients to."""
        assert self.promoted_everywhere(server), "a sentinel still names the killed server"
        master = self.master()
        server.start()
        # Not promotable until its first sync is done: a sentinel finding the master
        # slow on a loaded machine would otherwise promote an empty replica.
        with server.client() as client:
            client.config_set("replica-priority", 0)
        self._follow(server, master)
        self._until(lambda: self._linked(master), "the rejoined replica did not sync")
        with server.client() as client:
            client.config_set("replica-priority", 100)

    def healthy(self) -> bool:
        """Every sentinel names one master, up, with no failover under way, and
        knows the other sentinels; the master has every replica linked."""
        try:
            states = [s.master_state() for s in self.sentinels]
            if len({state["port"] for state in states}) != 1:
                return False
            for state in states:
                if state["flags"] != "master" or state["num-other-sentinels"] != str(SENTINELS - 1):
                    return False
            return self._linked(self.master())
        except (redis.RedisError, OSError, StopIteration):
            return False

    def _linked(self, master: RedisServer) -> bool:
        """``master`` is a master with every other server replicating from it, in sync."""
        try:
            with master.client() as client:
                replication = client.info("replication")
        except (redis.RedisError, OSError):
            return False
        links = replica_links(replication)
        return (
            replication["role"] == "master"
            and len(links) == REPLICAS
            and all(link["state"] == "online" for link in links)
        )

    def wait_healthy(self, timeout: float = READY_TIMEOUT_S) -> None:
        self._until(self.healthy, "the sentinel group is unhealthy", timeout)

    def _until(
        self, condition: Callable[[], bool], what: str, timeout: float = READY_TIMEOUT_S
    ) -> None:
        until(condition, what, timeout, [*self.servers, *self.sentinels])

    def flush(self) -> None:
        """Empty the master (FLUSHALL, replicated); loaded scripts stay."""
        self.master().flush()

    def destroy(self) -> None:
        """Kill every process and delete the group's files."""
        try:
            for node in [*self.sentinels, *self.servers]:
                node.destroy()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _running(name: str, **options: Any) -> Iterator[RedisSentinel]:
    """A group started under a fresh root named ``name``, destroyed after."""
    group = RedisSentinel(require_binary("redis-server"), temporary_root(name), **options)
    try:
        group.start()
        yield group
    finally:
        group.destroy()


@pytest.fixture(scope="session")
def tls_redis_sentinel(certs: Certs) -> Iterator[RedisSentinel]:
    """A group that takes only TLS with a client certificate, everywhere."""
    yield from _running("rsentinel-tls", tls=certs)


@pytest.fixture(scope="session")
def auth_redis_sentinel() -> Iterator[RedisSentinel]:
    """A group whose sentinels take only clients that give ``sentinel_password``."""
    password = "sentinel-s3cret-" + uuid.uuid4().hex[:8]
    yield from _running("rsentinel-auth", sentinel_password=password)


@pytest.fixture(scope="session")
def redis_sentinel() -> Iterator[RedisSentinel]:
    """A running master, its replica and three sentinels for the whole session
    (skipped locally when ``redis-server`` is missing, failed under ``CI=true``)."""
    yield from _running("rsentinel")
