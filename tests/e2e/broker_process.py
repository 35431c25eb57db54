"""A ``dejaq broker`` run as a child process on loopback, as an operator runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dejaq.core.redact import redact
from tests.servers import terminate

LISTENING = re.compile(r"dejaq broker listening on (\S+):(\d+) \(storage (.*)\)")
HTTP_ON = re.compile(r"dejaq http on (\S+)")
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
STORAGES = ["memory", "sqlite"]


def storage_url(kind: str, folder: Path) -> str:
    """The storage URL of a backend kind, its files (if any) in ``folder``."""
    if kind == "memory":
        return "memory://"
    if kind == "sqlite":
        return f"sqlite:///{folder / 'd.db'}"
    raise ValueError(f"unknown storage kind {kind!r}")


@dataclass
class BrokerProcess:
    """A ``dejaq broker`` child process and the address it listens on."""

    storage: str
    log_path: Path
    env: Mapping[str, str] = field(default_factory=dict)
    args: Sequence[str] = ()  # more flags of ``dejaq broker``
    process: subprocess.Popen[str] | None = None
    address: str = ""
    banner: list[str] = field(default_factory=list)  # stdout up to the listening line

    def start(self) -> BrokerProcess:
        self.launch()
        self.address = self._read_address()
        return self

    def launch(self) -> BrokerProcess:
        """Start the process, not waiting for it to listen (``wait_listening``)."""
        env = {**os.environ, **self.env}
        env.pop("DEJAQ_BROKER", None)
        with self.log_path.open("a") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "dejaq.driver.cli.main",
                    "broker",
                    "--listen",
                    "127.0.0.1:0",
                    "--storage",
                    self.storage,
                    *self.args,
                ],
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                env=env,
            )
        return self

    def wait_listening(self) -> BrokerProcess:
        """After ``launch``: wait (bounded) until it listens."""
        self.address = self._read_address()
        return self

    def _read_address(self) -> str:
        """Wait (bounded) for the line that tells the port."""
        assert self.process is not None and self.process.stdout is not None
        found = self.banner
        stdout = self.process.stdout

        def read() -> None:
            for line in stdout:
                found.append(line)
                if LISTENING.search(line):
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        match = LISTENING.search(found[-1]) if found else None
        if match is None:
            self.kill()
            raise RuntimeError(f"broker did not start; stdout {found!r}; log:\n{self.log_tail()}")
        assert match.group(3) == redact(self.storage)  # a password is never printed
        return f"{match.group(1)}:{match.group(2)}"

    @property
    def http_url(self) -> str:
        """The base URL of its HTTP API (started with ``--http``)."""
        for line in self.banner:
            match = HTTP_ON.search(line)
            if match:
                return match.group(1)
        raise AssertionError(f"the broker serves no HTTP API: {self.banner!r}")

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> int | None:
        """SIGTERM, wait up to 10 s, then SIGKILL. The exit code (None if never started)."""
        if self.process is None:
            return None
        terminate(self.process, STOP_TIMEOUT_S)
        return self._reap()

    def kill(self) -> int | None:
        """SIGKILL (a crash: nothing is flushed or released). The exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        return self._reap()

    def _reap(self) -> int:
        assert self.process is not None
        if self.process.stdout is not None:
            self.process.stdout.close()
        return self.process.returncode

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text().splitlines()[-lines:])


class Brokers:
    """Shared brokers, one per (storage kind, settings), started on first use and
    stopped at session end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._running: dict[str, BrokerProcess] = {}

    def get(self, kind: str, **env: str) -> BrokerProcess:
        key = "-".join([kind, *(f"{k}={v}" for k, v in sorted(env.items()))])
        broker = self._running.get(key)
        if broker is None:
            folder = self.folder / re.sub(r"[^A-Za-z0-9_-]", "_", key)
            folder.mkdir(parents=True, exist_ok=True)
            storage = storage_url(kind, folder)
            broker = BrokerProcess(storage, folder / "broker.log", env).start()
            self._running[key] = broker
        # No input may crash a broker: a shared one that died fails every later test.
        assert broker.alive, f"the {key} broker died; its log ends:\n{broker.log_tail()}"
        return broker

    def stop_all(self) -> dict[str, int | None]:
        return {key: b.stop() for key, b in self._running.items()}


StartBroker = Callable[..., BrokerProcess]
