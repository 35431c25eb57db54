"""What ``dejaq bridge run`` and ``dejaq outbox relay`` share: a bad
``--metrics`` said in one line before anything runs, and their work ended by
a signal."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path

import pytest

from dejaq.driver.cli.main import main
from dejaq.driver.cli.until_stopped import metrics_address, run_until_signal
from dejaq.driver.client import Client

BRIDGES = """
bridges:
  - name: b
    source: {url: "redis-stream://127.0.0.1:1/0", stream: "in", group: "g"}
    topic: t
    due: {field: "due_ms"}
"""


def test_a_metrics_address_without_a_host_is_the_loopback() -> None:
    assert metrics_address("0.0.0.0:9400") == ("0.0.0.0", 9400)
    assert metrics_address(":9465") == ("127.0.0.1", 9465)


def test_a_bad_metrics_address_is_one_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a bridges file, and an outbox URL where nothing listens
    path = tmp_path / "bridges.yaml"
    path.write_text(BRIDGES)
    commands = (
        ["bridge", "run", str(path)],
        ["outbox", "relay", "postgresql://app@127.0.0.1:1/app"],
    )
    for command in commands:
        # When either runs with a --metrics that is no HOST:PORT
        assert main([*command, "--metrics", "nowhere"]) == 1
        # Then it says so in one line
        said = capsys.readouterr()
        assert said.err == "dejaq: error: --metrics 'nowhere' is not HOST:PORT\n", command


def test_the_work_runs_with_a_client_until_a_signal_sets_its_event() -> None:
    # Given the flags of a command that connects to no broker before its work asks
    args = argparse.Namespace(broker=None, tls_ca=None, tls_cert=None, tls_key=None, token=None)
    seen: list[object] = []

    async def work(client: Client, stop: asyncio.Event) -> None:
        seen.append(client)
        # When the process is sent SIGTERM
        os.kill(os.getpid(), signal.SIGTERM)
        # Then the work's event is set, and the command returns 0
        await asyncio.wait_for(stop.wait(), 10)

    assert run_until_signal(args, work) == 0
    assert isinstance(seen[0], Client)
