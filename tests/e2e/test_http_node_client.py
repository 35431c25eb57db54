"""A client in another language: Node.js with its built-in fetch.

Given a broker with --http, when ``node/http_client.mjs`` produces, moves, cancels
and gets over the HTTP API, then it sees what a Python client sees: versions,
a stale cancel refused as a problem, a cancelled message gone.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.e2e.broker_process import BrokerProcess
from tests.servers import require_binary

CLIENT = Path(__file__).with_name("node") / "http_client.mjs"


def test_a_node_client_produces_moves_cancels_and_gets(tmp_path: Path) -> None:
    node = require_binary("node")
    broker = BrokerProcess("memory://", tmp_path / "broker.log", args=["--http", "127.0.0.1:0"])
    broker.start()
    try:
        done = subprocess.run(
            [node, str(CLIENT), broker.http_url],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        assert broker.stop() == 0
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "produced n1",
        "batch ACCEPTED DUPLICATE",
        "got n1 version 1 payload hello from node",
        "moved to 1000 ms later, version 2",
        "stale cancel refused: 409 ABORTED",
        "cancelled, version 0",
        "get after cancel: 404 NOT_FOUND",
    ]
