"""The NATS JetStream and RabbitMQ bridges pages, run as written against a
real server and a broker process: the program that makes the streams or
queues, the console blocks, the bridge process as the page runs it, and the
worked example's program with its output."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.examples import ROOT, Block, blocks, matches, session
from tests.e2e.broker_process import BrokerProcess
from tests.nats_server import NatsServer
from tests.rabbitmq_server import RabbitMQServer
from tests.servers import free_port

BIN = str(Path(sys.executable).parent)
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess("memory://", tmp_path / "broker.log").start()
    try:
        yield process
    finally:
        assert process.stop() == 0


def _env(broker: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
    return env | {"DEJAQ_BROKER": broker, "PATH": f"{BIN}:{env.get('PATH', '')}"}


def _run(program: Block, ours: dict[str, str], cwd: Path, log: Path | None = None) -> None:
    script = cwd / f"page-{program.line}.py"
    script.write_text(_swap(program.text, ours))
    done = subprocess.run(
        [sys.executable, str(script)], cwd=cwd, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr + (log.read_text() if log else "")
    assert program.output is not None
    assert matches(program.output.splitlines(), done.stdout.splitlines()), done.stdout


def _swap(text: str, ours: dict[str, str]) -> str:
    for page, test in ours.items():
        text = text.replace(page, test)
    return text


def _run_console(block: Block, ours: dict[str, str], broker: str, cwd: Path) -> None:
    for step in session(block):
        command = _swap(step.command, ours)
        expected = [_swap(line, ours) for line in step.expected]
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=_env(broker),
            capture_output=True,
            text=True,
            timeout=60,
        )
        got = (done.stdout + done.stderr).splitlines()
        assert "Traceback" not in done.stderr, (command, done.stderr)
        assert matches(expected, got), (
            f"$ {command}\nthe page shows:\n{expected}\nit printed:\n{got}"
        )


def run_page(page: Path, ours: dict[str, str], broker: BrokerProcess, cwd: Path) -> None:
    found = blocks(page)
    setup, example = [b for b in found if b.lang == "python" and b.output is not None]
    consoles = [b for b in found if b.lang == "console"]
    (bridges_yaml,) = [b for b in found if b.lang == "yaml"]
    run_line = next(
        c for b in found if b.lang == "sh" for c in b.text.splitlines() if "bridge run" in c
    )
    # Given the streams or queues made, the topic and the file, as the page says
    _run(setup, ours, cwd)
    (cwd / "bridges.yaml").write_text(_swap(bridges_yaml.text, ours))
    _run_console(consoles[0], ours, broker.address, cwd)
    # And the bridge running as the page runs it
    log = cwd / "bridge.log"
    with log.open("ab") as out:
        bridge = subprocess.Popen(
            ["bash", "-c", "exec " + _swap(run_line, ours)],
            cwd=cwd,
            env=_env(broker.address),
            stdout=out,
            stderr=out,
        )
    try:
        # When the example runs, then it prints what the page shows
        _run(example, ours, cwd, log)
        # And the status the page shows
        for block in consoles[1:]:
            _run_console(block, ours, broker.address, cwd)
    finally:
        bridge.terminate()
        assert bridge.wait(30) == 0, log.read_text()


def test_the_nats_page_runs_as_written(
    nats_server: NatsServer, broker: BrokerProcess, tmp_path: Path
) -> None:
    ours = {
        "127.0.0.1:4222": f"127.0.0.1:{nats_server.port}",
        "127.0.0.1:9401": f"127.0.0.1:{free_port()}",
    }
    run_page(ROOT / "docs" / "bridges-nats.md", ours, broker, tmp_path)


def test_the_rabbitmq_page_runs_as_written(
    rabbitmq_server: RabbitMQServer, broker: BrokerProcess, tmp_path: Path
) -> None:
    ours = {
        "127.0.0.1:5672": f"127.0.0.1:{rabbitmq_server.port}",
        "127.0.0.1:9402": f"127.0.0.1:{free_port()}",
    }
    run_page(ROOT / "docs" / "bridges-rabbitmq.md", ours, broker, tmp_path)
