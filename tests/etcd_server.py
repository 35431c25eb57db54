"""A throwaway etcd from the real binary, for tests and benchmarks.

One single-member ``etcd`` on free loopback ports (client and peer) with its
data folder in a temporary directory. ``start`` waits until ``/health`` says
so, under a deadline; ``kill`` then ``start`` again brings it back on the same
ports and data (leases and keys survive, as after a real etcd restart).

The session fixture ``etcd_server`` yields the running server. Tests share it
and keep apart by cluster name (every key lives under ``/dejaq/<cluster>/``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.servers import LocalServer, free_port, require_binary, running, temporary_root


@dataclass
class EtcdServer(LocalServer):
    """One ``etcd`` process, restartable on the same ports and data folder."""

    name = "etcd"
    binary: str
    root: Path
    port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "etcd.log"

    def _launch(self) -> None:
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [self.binary, "--data-dir", str(self.root / "data"), "--name", "default"]
        args += ["--listen-client-urls", self.url, "--advertise-client-urls", self.url]
        args += ["--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer]
        args += ["--initial-cluster", f"default={peer}"]
        self._spawn(args, output=self.log)

    def ready(self) -> bool:
        """``/health`` answers ``"health": "true"``."""
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (OSError, urllib.error.URLError, ValueError):
            return False


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    """A running etcd for the whole session (skipped locally when the binary is missing)."""
    with running(EtcdServer(require_binary("etcd"), temporary_root("etcd"))) as server:
        yield server
