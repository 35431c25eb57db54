"""``dejaq bridge run|list|status``: a bridge of its own killed with SIGKILL
mid-run loses nothing (its duplicates carry ids); list checks a file, status
reads a running bridge's metrics."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

from dejaq.core.model import TopicSettings
from dejaq.driver import Admin, embedded
from dejaq.driver.cli.main import main
from tests.bridges.support import TOPIC, bridges_file, published, until, write
from tests.redis_server import RedisServer
from tests.servers import free_port

pytestmark = pytest.mark.timeout(90)

COUNT = 2000


async def start_bridge(
    path: Path, broker: str, metrics_port: int, log: Path
) -> asyncio.subprocess.Process:
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "dejaq.driver.cli.main",
            "bridge",
            "run",
            str(path),
            "--broker",
            broker,
            "--metrics",
            f"127.0.0.1:{metrics_port}",
            stdout=out,
            stderr=out,
        )


async def test_a_bridge_killed_mid_run_loses_nothing(
    redis_server: RedisServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    redis_server.flush()
    path = tmp_path / "bridges.yaml"
    path.write_text(bridges_file(redis_server.url, redis_server.url))
    log = tmp_path / "bridge.log"
    port = free_port()
    # Given a broker, and a bridge process of its own
    async with embedded("memory://") as client:
        await Admin(client).create_topic(TOPIC, TopicSettings(lease_ms=1000))
        bridge = await start_bridge(path, client.address, port, log)
        try:
            with redis_server.client() as streams:
                # When messages flow and the bridge is killed with SIGKILL mid-run
                write(streams, COUNT, 2000)
                await until(lambda: streams.xlen("out") > COUNT // 4, 30, "publishing began")
                bridge.send_signal(signal.SIGKILL)
                await bridge.wait()
                # and another is started on the same file
                bridge = await start_bridge(path, client.address, port, log)
                want = {f"m{i}" for i in range(COUNT)}
                await until(lambda: {p.id for p in published(streams)} >= want, 60, "all out")
                # Then status reads the running bridge's figures
                status = await asyncio.to_thread(
                    main, ["bridge", "status", "--metrics", f"127.0.0.1:{port}", "--json"]
                )
                said = capsys.readouterr().out
                out = published(streams)
        finally:
            if bridge.returncode is None:
                bridge.send_signal(signal.SIGTERM)
                assert await asyncio.wait_for(bridge.wait(), 30) == 0, log.read_text()
    # every message came out, each duplicate with an id the test wrote, none early
    ids = Counter(p.id for p in out)
    assert set(ids) == want, log.read_text()[-2000:]
    assert all(p.at_ms >= p.due_ms for p in out)
    print(f"{sum(ids.values()) - len(ids)} duplicates after the kill")
    assert status == 0
    figures = json.loads(said)["reorder"]
    assert set(figures) == {"lag", "held", "accepted", "published", "unreadable", "errors"}
    assert figures["published"] > 0


def test_list_checks_the_file_and_names_each_bridge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a file of one bridge, its source's password in its URL
    path = tmp_path / "bridges.yaml"
    path.write_text(bridges_file("redis://:pw@127.0.0.1:6379/0", "redis://127.0.0.1:6380/0"))
    # When it is listed, then it is named with its ends, the password masked
    assert main(["bridge", "list", str(path)]) == 0
    assert capsys.readouterr().out == (
        "reorder: redis-stream://:***@127.0.0.1:6379/0 (stream=in) -> topic reorder"
        " -> redis-stream://127.0.0.1:6380/0 (stream=out)\n"
    )
    # And a bad field is one line naming the file, the bridge and the field
    path.write_text(path.read_text().replace('{field: "due_ms"}', '{field: "due_ms", format: x}'))
    assert main(["bridge", "list", str(path)]) == 1
    said = capsys.readouterr()
    assert said.out == "" and said.err == (
        f"dejaq: error: {path}: bridge 'reorder': due.format: 'x' is not one of ['ms', 'iso']\n"
    )


def test_status_of_nothing_running_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bridge", "status", "--metrics", f"127.0.0.1:{free_port()}"]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("dejaq: error: --metrics 127.0.0.1:") and "cannot read" in line
