"""A broker given ``--outbox`` relays the outbox itself, into its own handlers."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import psycopg
import pytest

from dejaq import outbox
from dejaq.core.errors import InvalidArgument
from dejaq.driver import Admin, Client, embedded
from tests.e2e.broker_process import BrokerProcess
from tests.outbox.conftest import HOUR_MS, TOPIC, on_topic

pytestmark = pytest.mark.timeout(60)


async def eventually_on_topic(client: Client, msg_id: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await on_topic(client, msg_id):
        assert time.monotonic() < deadline, f"{msg_id} never reached the topic"
        await asyncio.sleep(0.02)


async def test_a_broker_relays_its_outbox(app_db: str) -> None:
    # Given a broker relaying the application's outbox
    async with embedded("memory://", outbox=app_db) as client:
        await Admin(client).create_topic(TOPIC)
        # When the application commits a message with a key and headers, then
        # one for a topic that does not exist, then another
        with psycopg.connect(app_db) as conn:
            with conn.transaction():
                first = outbox.schedule(
                    conn, TOPIC, b"1", delay_ms=HOUR_MS, key="k", headers={"a": "b"}
                )
            with conn.transaction():
                outbox.schedule(conn, "no-such-topic", b"x")
            with conn.transaction():
                moved = outbox.schedule(conn, TOPIC, b"2", delay_ms=HOUR_MS)
                outbox.move(conn, TOPIC, moved, delay_ms=2 * HOUR_MS)
        # Then the good ones reach the topic, the bad one is parked with its reason
        await eventually_on_topic(client, first)
        await eventually_on_topic(client, moved)
        info = await Admin(client).get(TOPIC, first)
        assert (info.key, info.headers) == ("k", {"a": "b"})
        deadline = time.monotonic() + 30
        while outbox.status(app_db).waiting:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        moved_at = (await Admin(client).get(TOPIC, moved)).message.timestamp
        assert moved_at > time.time() * 1000 + 1.5 * HOUR_MS
        (parked,) = outbox.status(app_db).parked_rows
        assert parked.topic == "no-such-topic" and "NotFound" in parked.reason


async def test_an_outbox_that_is_not_postgresql_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="postgresql"):
        async with embedded("memory://", outbox="mysql://app"):
            pass


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.load(answer)


def test_the_console_lists_each_outbox(app_db: str, tmp_path: Path) -> None:
    # Given a broker process relaying the outbox, with its HTTP API, and a row
    # for a topic that does not exist
    with psycopg.connect(app_db) as conn, conn.transaction():
        outbox.schedule(conn, "no-such-topic", b"x", id="lost-1")
    process = BrokerProcess(
        "memory://", tmp_path / "broker.log", args=["--http", "127.0.0.1:0", "--outbox", app_db]
    ).start()
    try:
        # When the console asks for the outboxes, once the relay has parked the row
        deadline = time.monotonic() + 30
        while True:
            (shown,) = _get_json(f"{process.http_url}/v1/outboxes")["outboxes"]
            if shown.get("parked") == 1 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        page = urllib.request.urlopen(f"{process.http_url}/console/outboxes.js", timeout=10)
        script = page.read().decode()
    finally:
        assert process.stop() == 0
    # Then it lists the outbox by its URL with what waits and the parked row, and
    # the console has the page that shows them
    assert shown["name"] == app_db and shown["waiting"] == 0
    (row,) = shown["parked_rows"]
    assert (row["topic"], row["id"], row["op"]) == ("no-such-topic", "lost-1", "schedule")
    assert "NotFound" in row["reason"]
    assert "/v1/outboxes" in script
