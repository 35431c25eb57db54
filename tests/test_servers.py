"""The server harness: the skip-locally / fail-in-CI policy for missing binaries,
and start / poll-until-ready / kill / log tail, on a stand-in server."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.servers import LocalServer, require_binary, running, temporary_root

MISSING = "dejaq-no-such-binary"


def test_a_present_binary_is_found() -> None:
    assert require_binary("python3")


def test_a_missing_binary_skips_locally(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_binary(MISSING)


def test_a_missing_binary_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception):
        require_binary(MISSING)


@dataclass
class StandIn(LocalServer):
    """A Python child that writes a line to its log and then lives ``lives_s``;
    ready once the test says so."""

    name = "stand-in"
    root: Path
    lives_s: float = 60.0
    answers: bool = False

    @property
    def log(self) -> Path:
        return self.root / "stand-in.log"

    def _launch(self) -> None:
        code = f"print('stand-in says hello', flush=True); import time; time.sleep({self.lives_s})"
        self._spawn([sys.executable, "-c", code], output=self.log)

    def ready(self) -> bool:
        return self.answers


def test_a_ready_server_runs_until_killed() -> None:
    # Given a server that answers at once
    with running(StandIn(temporary_root("stand-in"), answers=True)) as server:
        # Then start returned with it running
        assert server.process is not None and server.process.poll() is None
        process = server.process
        # When it is killed, it is gone
        server.kill()
        assert process.poll() is not None and server.process is None
    # and its files went with the block
    assert not server.root.exists()


def test_a_server_that_never_answers_is_killed_at_the_deadline() -> None:
    server = StandIn(temporary_root("stand-in"))
    try:
        # When it does not answer before the deadline
        with pytest.raises(RuntimeError) as failed:
            server.start(timeout=0.3)
        # Then it was killed, and the error shows its log
        assert server.process is None
        assert "stand-in did not become ready" in str(failed.value)
        assert "stand-in says hello" in str(failed.value)
    finally:
        server.destroy()


@pytest.mark.timeout(10)  # far shorter than the start deadline below
def test_a_server_that_exits_fails_before_the_deadline() -> None:
    server = StandIn(temporary_root("stand-in"), lives_s=0)
    try:
        # When it exits while starting, the start fails without waiting out the deadline
        with pytest.raises(RuntimeError, match="stand-in did not become ready"):
            server.start(timeout=3600)
    finally:
        server.destroy()
