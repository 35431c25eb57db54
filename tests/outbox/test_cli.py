"""``dejaq outbox``: what it says of a database with no outbox, one it cannot
reach, and the parked rows."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid

import psycopg

from dejaq import outbox
from dejaq.driver import Client
from tests.outbox.conftest import drain
from tests.postgres_server import PostgresServer
from tests.servers import free_port


def dejaq(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dejaq.driver.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_status_of_a_database_with_no_outbox_says_how_to_make_one(
    postgres_server: PostgresServer,
) -> None:
    url = postgres_server.create_database(f"bare_{uuid.uuid4().hex[:10]}")
    done = dejaq("outbox", "status", url)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"dejaq: error: {url}: no outbox there (dejaq outbox install URL creates it)"
    )


def test_a_database_out_of_reach_is_one_line() -> None:
    url = f"postgresql://someone:secret@127.0.0.1:{free_port()}/app"
    done = dejaq("outbox", "install", url)
    assert done.returncode == 1
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("dejaq: error: postgresql://someone:") and "secret" not in line


async def test_status_lists_the_parked_rows(app_db: str, broker: Client) -> None:
    # Given a row parked for its unknown topic
    with psycopg.connect(app_db) as conn, conn.transaction():
        outbox.schedule(conn, "no-such-topic", b"x", id="lost-7")
    await drain(app_db, broker)
    # When the status is asked, as text and as JSON; then both show it with its reason
    # (off the loop: the broker of this test serves in it)
    text = await asyncio.to_thread(dejaq, "outbox", "status", app_db)
    assert text.returncode == 0, text.stderr
    first, parked = text.stdout.splitlines()
    assert first == "waiting: 0  oldest: -  parked: 1"
    assert "schedule no-such-topic/lost-7" in parked and "NotFound" in parked
    doc = json.loads((await asyncio.to_thread(dejaq, "outbox", "status", app_db, "--json")).stdout)
    assert (doc["waiting"], doc["parked"]) == (0, 1)
    assert doc["parked_rows"][0]["id"] == "lost-7"
