"""The harness every throwaway server shares (etcd, Redis, PostgreSQL, ...).

A ``LocalServer`` runs from a real binary on loopback with its files in a
temporary folder. A subclass says how to launch it (``_launch``) and how to
tell it is ready (``ready``); ``start`` polls that under a deadline, and when
the server does not come up it is killed and the error carries its log tail.
``running`` is the body of a fixture: start, yield, destroy.

Policy: a server binary missing on a developer's machine skips only the tests
that need it; under ``CI=true`` the same absence fails them, so a backend is
never silently left untested in CI.
"""

from __future__ import annotations

import abc
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar, NoReturn, TypeVar

import pytest

POLL_S = 0.02
STOP_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 20


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def unavailable(reason: str) -> NoReturn:
    """Skip the test for want of ``reason``; fail it under ``CI=true``."""
    if in_ci():
        pytest.fail(f"{reason}; CI=true runs every backend", pytrace=False)
    pytest.skip(reason)


# Set by ``pytest --fast`` (tests/conftest.py): the in-process tier starts no server.
FAST_TIER = {"on": False}


def no_server_in_the_fast_tier(name: str) -> None:
    """Fail a test of the fast tier that reaches for a server: the tier's
    selection (tests/conftest.py) must leave it out."""
    if FAST_TIER["on"]:
        pytest.fail(
            f"a test of the fast tier (--fast) starts {name}: add its fixture to"
            " SERVER_FIXTURES in tests/conftest.py",
            pytrace=False,
        )


def require_binary(name: str) -> str:
    """The path of executable ``name``; skip the test (fail it under CI) when missing."""
    no_server_in_the_fast_tier(name)
    path = shutil.which(name)
    if path is None:
        unavailable(f"{name!r} is not installed (not on PATH)")
    return path


def free_port() -> int:
    """A loopback TCP port free right now (for a server started next)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def temporary_root(name: str) -> Path:
    """A new folder for a server's files, outside pytest's tmp_path (whose
    parents may be private to root, which a server run as another user needs)."""
    return Path(tempfile.mkdtemp(prefix=f"dejaq-{name}-"))


def terminate(process: subprocess.Popen[Any], grace_s: float) -> int:
    """SIGTERM, then SIGKILL if it has not exited within ``grace_s``; the exit code."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


class LocalServer(abc.ABC):
    """One throwaway server: launched, polled until ready, killed, its log read."""

    name: ClassVar[str]  # in messages: "etcd", "redis-server", ...
    start_timeout_s: ClassVar[float] = 15.0
    root: Path  # its files; ``destroy`` deletes them
    process: subprocess.Popen[bytes] | None = None  # None when it is not our child

    @property
    @abc.abstractmethod
    def log(self) -> Path:
        """The server's log file."""

    @abc.abstractmethod
    def _launch(self) -> None:
        """Start the server, without waiting for it to be ready."""

    @abc.abstractmethod
    def ready(self) -> bool:
        """Whether it answers clients now."""

    def start(self, timeout: float | None = None) -> None:
        """Launch and wait (bounded) until ready; ``RuntimeError`` with the log
        tail when it exits or the deadline passes first."""
        timeout = self.start_timeout_s if timeout is None else timeout
        self._launch()
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self._exited() or time.monotonic() > deadline:
                with contextlib.suppress(Exception):
                    self.kill()
                raise RuntimeError(
                    f"{self.name} did not become ready within {timeout:g} s:\n{self.log_tail()}"
                )
            time.sleep(POLL_S)  # polling a condition under a deadline

    def kill(self) -> None:
        """Stop at once (SIGKILL): clients see their connections drop. ``start``
        again brings it back on the same port and files."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(STOP_TIMEOUT_S)
        self.process = None

    def destroy(self) -> None:
        """Kill it and delete its files."""
        try:
            self.kill()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return f"(no {self.name} log)"

    def _spawn(self, args: list[str], output: Path | None = None) -> None:
        """Run ``args`` as our child; its stdout and stderr appended to ``output``."""
        if output is None:
            devnull = subprocess.DEVNULL
            self.process = subprocess.Popen(args, stdout=devnull, stderr=devnull)
            return
        with output.open("ab") as out:
            self.process = subprocess.Popen(args, stdout=out, stderr=out)

    def _exited(self) -> bool:
        return self.process is not None and self.process.poll() is not None


Server = TypeVar("Server", bound=LocalServer)


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    """``server`` started for the block, destroyed after it (also when it fails to start)."""
    try:
        server.start()
        yield server
    finally:
        server.destroy()
