"""The bridges pages, run as written: the Redis Streams page's worked example
against a real redis-server and a broker process (its console blocks, its
bridge process, its program and its output), and every bridges file the
pages show read as the page says."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dejaq.bridges import config
from dejaq.core.errors import InvalidArgument
from tests.docs.examples import ROOT, Block, blocks, matches, session
from tests.e2e.broker_process import BrokerProcess
from tests.redis_server import RedisServer
from tests.servers import free_port

PAGE = ROOT / "docs" / "bridges-redis-streams.md"
GUIDE = ROOT / "docs" / "bridges.md"
PAGE_REDIS = "127.0.0.1:6379"
PAGE_METRICS = "127.0.0.1:9400"
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


def _ours(text: str, redis: str, metrics: str) -> str:
    return text.replace(PAGE_REDIS, redis).replace(PAGE_METRICS, metrics)


def _run_console(block: Block, redis: str, metrics: str, broker: str, cwd: Path) -> None:
    for step in session(block):
        command = _ours(step.command, redis, metrics)
        expected = [_ours(line, redis, metrics) for line in step.expected]
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


def test_the_redis_streams_page_runs_as_written(
    redis_server: RedisServer, broker: BrokerProcess, tmp_path: Path
) -> None:
    redis_server.flush()
    redis = f"127.0.0.1:{redis_server.port}"
    metrics = f"127.0.0.1:{free_port()}"
    found = blocks(PAGE)
    consoles = [b for b in found if b.lang == "console"]
    (bridges_yaml,) = [b for b in found if b.lang == "yaml"]
    (program,) = [b for b in found if b.lang == "python" and b.output is not None]
    run_line = next(
        c for b in found if b.lang == "sh" for c in b.text.splitlines() if "bridge run" in c
    )
    (tmp_path / "bridges.yaml").write_text(_ours(bridges_yaml.text, redis, metrics))
    # Given the topic and the file, as the page's first console block
    _run_console(consoles[0], redis, metrics, broker.address, tmp_path)
    # And the bridge running as the page runs it
    log = tmp_path / "bridge.log"
    with log.open("ab") as out:
        bridge = subprocess.Popen(
            ["bash", "-c", "exec " + _ours(run_line, redis, metrics)],
            cwd=tmp_path,
            env=_env(broker.address),
            stdout=out,
            stderr=out,
        )
    try:
        # When the program runs, then it prints what the page shows
        script = tmp_path / "reorder.py"
        script.write_text(_ours(program.text, redis, metrics))
        done = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr + log.read_text()
        assert program.output is not None
        assert matches(program.output.splitlines(), done.stdout.splitlines()), done.stdout
        # And the status the page shows
        for block in consoles[1:]:
            _run_console(block, redis, metrics, broker.address, tmp_path)
    finally:
        bridge.terminate()
        assert bridge.wait(30) == 0, log.read_text()


def test_the_files_the_pages_show_are_read_as_they_say(tmp_path: Path) -> None:
    (shape,) = [b for b in blocks(GUIDE) if b.lang == "yaml"]
    (spec,) = config.parse(shape.text)
    assert (spec.name, spec.topic) == ("reorder", "reorder")
    # The refusal the guide shows, for the field it names
    (said,) = [
        b.text.strip() for b in blocks(GUIDE) if b.lang == "text" and "dejaq: error" in b.text
    ]
    bad = shape.text.replace('{field: "due_ms"}', '{field: "due_ms", format: unix}')
    with pytest.raises(InvalidArgument) as refused:
        config.parse(bad, "bridges.yaml")
    assert said == f"dejaq: error: {refused.value}"
