"""What the throwaway Redis processes of the tests share: a single server
(``redis_server``), a cluster node (``redis_cluster``), a sentinel
(``redis_sentinel``).

``RedisProcess`` is a ``LocalServer`` on loopback ``port``, logging to
``log_name`` in its folder; given ``tls`` (the session's test certificates) it
listens only on TLS and asks clients for a certificate of the test CA.
``client`` is a short-timeout client of it (TLS and password included), and it
is ``ready`` when PING answers. ``until`` waits for a group of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import redis

from tests.certs import Certs
from tests.servers import POLL_S, LocalServer


def tls_client(certs: Certs | None) -> dict[str, Any]:
    """redis-py's keyword arguments for a TLS client of the test CA (none without TLS)."""
    if certs is None:
        return {}
    client = certs.client("redis-client")
    return {
        "ssl": True,
        "ssl_ca_certs": str(certs.ca),
        "ssl_certfile": str(client.cert),
        "ssl_keyfile": str(client.key),
    }


def tls_query(certs: Certs) -> str:
    """A storage URL's options for a TLS client of the test CA."""
    client = certs.client("redis-client")
    return f"ssl_ca_certs={certs.ca}&ssl_certfile={client.cert}&ssl_keyfile={client.key}"


def text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def replica_links(replication: dict[str, Any]) -> list[dict[str, Any]]:
    """The replicas' entries (``slave0``, ``slave1``, ...) of ``INFO replication``."""
    return [
        value for key, value in replication.items() if key.startswith("slave") and key[5:].isdigit()
    ]


class RedisProcess(LocalServer):
    """A Redis process (server or sentinel) on ``port``, its files in ``root``."""

    log_name: ClassVar[str] = "redis.log"
    port: int
    tls: Certs | None
    password: str = ""

    @property
    def log(self) -> Path:
        return self.root / self.log_name

    def client(self) -> redis.Redis:
        return redis.Redis(
            port=self.port,
            password=self.password or None,
            socket_timeout=2,
            socket_connect_timeout=2,
            **tls_client(self.tls),
        )

    def ready(self) -> bool:
        """PING answers."""
        try:
            with self.client() as client:
                return bool(client.ping())
        except redis.ConnectionError:
            return False

    def _server_args(self) -> list[str]:
        """``redis-server``'s options to listen (on TLS only, given ``tls``) and
        to keep no data on disk, its files and log in ``root``."""
        args = ["--port", str(self.port), "--bind", "127.0.0.1"]
        if self.tls is not None:
            args[1:2] = ["0", "--tls-port", str(self.port)]
            args += ["--tls-cert-file", str(self.tls.server.cert)]
            args += ["--tls-key-file", str(self.tls.server.key)]
            args += ["--tls-ca-cert-file", str(self.tls.ca), "--tls-auth-clients", "yes"]
        args += ["--save", "", "--appendonly", "no", "--dir", str(self.root)]
        # A replica syncs at once (a group forming, a killed master rejoining); by
        # default a master waits 5 s for more replicas to share one transfer.
        args += ["--repl-diskless-sync-delay", "0"]
        return [*args, "--logfile", str(self.log)]


def until(
    condition: Callable[[], bool], what: str, timeout: float, nodes: Sequence[LocalServer]
) -> None:
    """Poll ``condition`` until true; after ``timeout`` seconds, ``RuntimeError``
    saying ``what`` with the tails of the ``nodes``' logs."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            tails = "\n".join(n.log_tail(5) for n in nodes)
            raise RuntimeError(f"{what} after {timeout:g} s:\n{tails}")
        time.sleep(POLL_S)  # polling a condition under a deadline
