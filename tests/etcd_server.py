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
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.servers import free_port, require_binary

START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0


@dataclass
class EtcdServer:
    """One ``etcd`` process, restartable on the same ports and data folder."""

    binary: str
    root: Path
    port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "etcd.log"

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start and wait (bounded) until it reports healthy."""
        peer = f"http://127.0.0.1:{self.peer_port}"
        args = [self.binary, "--data-dir", str(self.root / "data"), "--name", "default"]
        args += ["--listen-client-urls", self.url, "--advertise-client-urls", self.url]
        args += ["--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer]
        args += ["--initial-cluster", f"default={peer}"]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=log)
        deadline = time.monotonic() + timeout
        while not self.healthy():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"etcd did not become healthy:\n{self._log_tail()}")
            time.sleep(0.02)  # polling a condition under a deadline

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/health", timeout=1) as r:
                return bool(json.loads(r.read()).get("health") == "true")
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def kill(self) -> None:
        """Stop at once (SIGKILL): clients see their streams break."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
        self.process = None

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no etcd log)"


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[EtcdServer]:
    """A running etcd for the whole session (skipped locally when the binary is missing)."""
    server = EtcdServer(require_binary("etcd"), Path(tempfile.mkdtemp(prefix="dejaq-etcd-")))
    try:
        server.start()
        yield server
    finally:
        server.kill()
        shutil.rmtree(server.root, ignore_errors=True)
