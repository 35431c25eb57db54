"""A throwaway Redis server from the real binary, for tests and benchmarks.

``redis-server`` on a free loopback port with no persistence (``--save ""
--appendonly no``) and its working folder in a temporary directory. ``start``
waits until PING answers, under a deadline; ``kill`` and ``start`` again on the
same port let a test cut the server away and bring it back.

The session fixture ``redis_server`` yields the running server; the storage
URL factory calls ``flush`` (FLUSHALL) so each test starts empty.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis

from tests.servers import free_port, require_binary

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


@dataclass
class RedisServer:
    """One ``redis-server`` process on ``port``, restartable on the same port."""

    binary: str
    root: Path
    port: int = field(default_factory=free_port)
    persistent: bool = False  # AOF with fsync on every write: survives a restart
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def log(self) -> Path:
        return self.root / "redis.log"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2)

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start and wait (bounded) until PING answers."""
        args = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent else []
        args += ["--save", "", "--appendonly", "no", *aof, "--dir", str(self.root)]
        args += ["--logfile", str(self.log)]
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        with self.client() as client:
            while True:
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    pass
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    raise RuntimeError(f"redis-server did not answer PING:\n{self._log_tail()}")
                time.sleep(0.01)  # polling a condition under a deadline

    def kill(self) -> None:
        """Stop at once (SIGKILL): clients see the connection drop."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
        self.process = None

    def flush(self) -> None:
        """Empty every database (FLUSHALL); loaded scripts stay."""
        with self.client() as client:
            client.flushall()

    def _log_tail(self) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])
        except OSError:
            return "(no server log)"


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A running server for the whole session (skipped locally when the binary is missing)."""
    server = RedisServer(
        require_binary("redis-server"), Path(tempfile.mkdtemp(prefix="dejaq-redis-"))
    )
    try:
        server.start()
        yield server
    finally:
        server.kill()
        shutil.rmtree(server.root, ignore_errors=True)
