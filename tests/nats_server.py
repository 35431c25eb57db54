"""A throwaway NATS server with JetStream from the real binary, for tests and benchmarks.

``nats-server -js`` on a free loopback port, its JetStream store in a
temporary folder and its monitoring endpoint on another free port. ``start``
waits until ``/healthz`` says JetStream is ready, under a deadline; ``kill``
(SIGKILL) and ``start`` again bring it back on the same port and store, with
its streams, consumers and their acknowledgements, as after a crash.

The session fixture ``nats_server`` yields the running server; tests keep
apart by stream and subject names of their own. Given ``tls`` (the session's
test certificates) a server of a test's own takes TLS connections only, and
asks clients for a certificate signed by the test CA.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.certs import Certs
from tests.servers import LocalServer, free_port, require_binary, running, temporary_root


@dataclass
class NatsServer(LocalServer):
    """One ``nats-server -js`` process, restartable on the same ports and store."""

    name = "nats-server"
    start_timeout_s = 30.0
    binary: str
    root: Path
    port: int = field(default_factory=free_port)
    monitor_port: int = field(default_factory=free_port)
    tls: Certs | None = None  # TLS only, client certificates required

    @property
    def url(self) -> str:
        return f"{'tls' if self.tls else 'nats'}://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.root / "nats.log"

    def _launch(self) -> None:
        args = [self.binary, "-a", "127.0.0.1", "-p", str(self.port), "-js"]
        args += ["-sd", str(self.root / "jetstream"), "-m", str(self.monitor_port)]
        args += ["--server_name", f"dejaq-test-{self.port}"]
        if self.tls is not None:
            args += ["--tlsverify", "--tlscert", str(self.tls.server.cert)]
            args += ["--tlskey", str(self.tls.server.key), "--tlscacert", str(self.tls.ca)]
        self._spawn(args, output=self.log)

    def ready(self) -> bool:
        """``/healthz`` answers ``{"status": "ok"}`` (JetStream included)."""
        try:
            with urllib.request.urlopen(
                f"http://127.0.0.1:{self.monitor_port}/healthz", timeout=1
            ) as answer:
                return bool(json.loads(answer.read()).get("status") == "ok")
        except (OSError, urllib.error.URLError, ValueError):
            return False


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NatsServer]:
    """A running server for the whole session (skipped locally when the binary is missing)."""
    binary = require_binary("nats-server")
    with running(NatsServer(binary, temporary_root("nats"))) as server:
        yield server
