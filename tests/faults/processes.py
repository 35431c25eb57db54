"""The processes of a fault run: brokers on fixed ports (so a restarted one is
found at its old address) and the worker processes.

Every broker is started with libfaketime preloaded when it is installed, its
wall clock's shift read from a file of its own (``+0`` until a clock step
writes another), so any broker's wall clock can be stepped while it runs; its
monotonic clock is left alone, as a real step leaves it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e.broker_process import LISTENING, START_TIMEOUT_S, STOP_TIMEOUT_S
from tests.servers import POLL_S, free_port, terminate

REPO = Path(__file__).resolve().parents[2]
ETCD_TTL_S = 3


def libfaketime() -> Path | None:
    """Debian's libfaketime (package faketime), or None when not installed."""
    binary = shutil.which("faketime")
    if binary is None:
        return None
    found = sorted(Path(binary).resolve().parent.parent.glob("lib/*/faketime/libfaketime.so.1"))
    return found[0] if found else None


@dataclass
class Broker:
    """One ``dejaq broker`` of the cluster, restartable on the same port."""

    name: str
    storage: str
    etcd: str
    cluster: str
    folder: Path
    port: int = field(default_factory=free_port)
    faketime: Path | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        return self.folder / f"{self.name}.log"

    @property
    def shift_file(self) -> Path:
        return self.folder / f"{self.name}.faketime"

    def start(self) -> None:
        env = {
            **os.environ,
            "DEJAQ_ETCD": self.etcd,
            "DEJAQ_CLUSTER": self.cluster,
            "DEJAQ_ETCD_TTL_S": str(ETCD_TTL_S),
        }
        env.pop("DEJAQ_BROKER", None)
        if self.faketime is not None:
            if not self.shift_file.exists():
                self.shift_file.write_text("+0\n")
            env |= {
                "LD_PRELOAD": str(self.faketime),
                "FAKETIME_TIMESTAMP_FILE": str(self.shift_file),
                "FAKETIME_CACHE_DURATION": "1",  # read the file again every second
                # A step moves the wall clock only, as an NTP or operator step does
                # (libfaketime would shift the monotonic clock too).
                "DONT_FAKE_MONOTONIC": "1",
            }
        args = [sys.executable, "-m", "dejaq.driver.cli.main", "broker"]
        args += ["--listen", self.address, "--storage", self.storage]
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("a") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=log, env=env, cwd=REPO)
        self._wait_listening(offset)

    def _wait_listening(self, offset: int) -> None:
        """Until the broker prints that it listens (its stdout goes to its log)."""
        assert self.process is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        while not LISTENING.search(self.log.read_bytes()[offset:].decode(errors="replace")):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                tail = "\n".join(self.log.read_text().splitlines()[-30:])
                raise RuntimeError(f"broker {self.name} did not start; log:\n{tail}")
            time.sleep(POLL_S)  # polling a condition under a deadline

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or released."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after a grace; the exit code."""
        if self.process is None:
            return None
        return terminate(self.process, STOP_TIMEOUT_S)

    def step_clock(self, shift_s: float) -> None:
        """Set this broker's clock ``shift_s`` seconds off the true time (libfaketime)."""
        assert self.faketime is not None, "the clock can only be stepped under libfaketime"
        self.shift_file.write_text(f"{shift_s:+g}\n")


@dataclass
class Worker:
    """A producer or consumer process of ``tests.faults.workers``."""

    name: str
    args: list[str]
    folder: Path
    process: subprocess.Popen[bytes] | None = None
    frozen: bool = False

    @property
    def journal(self) -> Path:
        return self.folder / f"{self.name}.jsonl"

    def start(self) -> Worker:
        with (self.folder / f"{self.name}.log").open("ab") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.faults.workers",
                    self.args[0],
                    self.name,
                    str(self.journal),
                    *self.args[1:],
                ],
                stdout=log,
                stderr=log,
                cwd=REPO,
            )
        return self

    def freeze(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGCONT)
        self.frozen = False

    def wait(self, timeout_s: float) -> int | None:
        assert self.process is not None
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def dump_tasks(self) -> str:
        """Ask the worker for its tasks' stacks (SIGUSR1); its log tail then."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGUSR1)
            time.sleep(0.5)  # a diagnostic pause: time to write the stacks
        return self.log_tail(80)

    def stop(self) -> int | None:
        """SIGTERM (thawed first), then SIGKILL after a grace; the exit code."""
        if self.process is None:
            return None
        if self.frozen:
            self.thaw()
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            if self.wait(STOP_TIMEOUT_S) is None:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def log_tail(self, lines: int = 20) -> str:
        path = self.folder / f"{self.name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
