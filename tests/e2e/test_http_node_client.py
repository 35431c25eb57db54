"""A client in another language: Node.js with its built-in fetch.

Given a broker with --http, when ``node/http_client.mjs`` produces, moves, cancels
and gets over the HTTP API, then it sees what a Python client sees: versions,
a stale cancel refused as a problem, a cancelled message gone.

When ``node/http_consumer.mjs`` consumes 10,000 messages due over 10 s with 3
workers that long-poll, ack, nack and let some leases run out, then every
message is settled once, none comes early and nothing is left.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.e2e.broker_process import BrokerProcess
from tests.servers import require_binary

CLIENT = Path(__file__).with_name("node") / "http_client.mjs"
CONSUMER = CLIENT.with_name("http_consumer.mjs")


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


def test_node_workers_long_poll_and_settle_every_message_once_none_early(tmp_path: Path) -> None:
    # given a broker, and a Node.js program that produces 10,000 messages due over 10 s
    node = require_binary("node")
    broker = BrokerProcess("memory://", tmp_path / "broker.log", args=["--http", "127.0.0.1:0"])
    broker.start()
    try:
        # when its 3 workers consume them by long polling
        done = subprocess.run(
            [node, str(CONSUMER), broker.http_url, "10000", "10000"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        assert broker.stop() == 0
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # then each message was acked once in effect, none early, some nacked and
    # some left to their lease, and the topic is empty
    assert lines[:4] == [
        "settled 10000 of 10000, 0 more than once",
        "early 0",
        "nacked true, expired true",
        'left {"waiting":0,"due":0,"leased":0,"dead":0}',
    ], done.stdout
    print(*lines[4:], sep="\n")  # the lateness of first deliveries, seen by the workers
