"""``dejaq broker --bridges FILE``: the broker runs the file's bridges, shows
them at ``GET /v1/bridges`` (the console's Bridges page), and refuses a bad
file before it serves."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dejaq.broker.config import BrokerConfig
from dejaq.core.errors import InvalidArgument
from dejaq.driver import Admin, Client
from tests.bridges.support import TOPIC, bridges_file, until, write
from tests.e2e.broker_process import BrokerProcess
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def _get_text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return str(answer.read().decode())


async def test_a_broker_runs_its_bridges_and_shows_them(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    redis_server.flush()
    path = tmp_path / "bridges.yaml"
    path.write_text(bridges_file(redis_server.url, redis_server.url))
    # Given a broker process running the bridges file, with its HTTP API
    process = await asyncio.to_thread(
        BrokerProcess(
            "memory://",
            tmp_path / "broker.log",
            args=["--http", "127.0.0.1:0", "--bridges", str(path)],
        ).start
    )
    try:
        async with Client(process.address, tls=False) as client:
            await Admin(client).create_topic(TOPIC)
        # When messages arrive at the source
        with redis_server.client() as streams:
            write(streams, 100, 200, lead_ms=100)
            await until(lambda: streams.xlen("out") >= 100, 30, "all published")

        # Then the console's list shows the bridge and what it published
        def shown() -> dict[str, Any]:
            (one,) = _get_json(f"{process.http_url}/v1/bridges")["bridges"]
            return dict(one)

        await until(lambda: shown()["published"] >= 100, 10, "the figures caught up")
        bridge = shown()
        script = await asyncio.to_thread(_get_text, f"{process.http_url}/console/bridges.js")
    finally:
        assert process.stop() == 0, process.log_tail()
    assert (bridge["name"], bridge["topic"]) == ("reorder", TOPIC)
    assert bridge["source"] == redis_server.url.replace("redis://", "redis-stream://")
    assert bridge["accepted"] == 100 and bridge["unreadable"] == 0
    assert "/v1/bridges" in script


def test_a_bad_bridges_file_stops_the_broker_before_it_serves(tmp_path: Path) -> None:
    path = tmp_path / "bridges.yaml"
    path.write_text(bridges_file("redis://h:1/0", "redis://h:1/0").replace("topic:", "tropic:"))
    with pytest.raises(InvalidArgument, match="bridge 'reorder': unknown field"):
        BrokerConfig.from_sources({"bridges": str(path)}, env={})
    path.write_text(bridges_file("redis://h:1/0", "redis://h:1/0"))
    with pytest.raises(InvalidArgument, match="dejaq bridge run FILE"):
        BrokerConfig.from_sources({"bridges": str(path), "auth": "auth.yaml"}, env={})
