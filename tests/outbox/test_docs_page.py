"""The outbox page, run as written against a real PostgreSQL and a broker
process: its console blocks and its program, the application's database in
place of the page's, and the relay under the role the page grants."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from dejaq import outbox
from tests.docs.examples import ROOT, Block, blocks, matches, session
from tests.e2e.broker_process import BrokerProcess
from tests.postgres_server import PostgresServer

PAGE = ROOT / "docs" / "outbox.md"
PAGE_URL = "postgresql://shop@127.0.0.1:5432/shop"
BIN = str(Path(sys.executable).parent)
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    process = BrokerProcess("memory://", tmp_path / "broker.log").start()
    try:
        yield process
    finally:
        assert process.stop() == 0


def _role_url(url: str, role: str) -> str:
    return re.sub(r"//[^@/]+@", f"//{role}@", url, count=1)


def _run_console(block: Block, owner: str, relay: str, broker: str, cwd: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
    env |= {"DEJAQ_BROKER": broker, "PATH": f"{BIN}:{env.get('PATH', '')}"}
    for step in session(block):
        # The relay and the status reads run as the page's least-rights role.
        as_relay = step.command.startswith(("dejaq outbox relay", "dejaq outbox status"))
        command = step.command.replace(PAGE_URL, relay if as_relay else owner)
        expected = [line.replace(PAGE_URL, relay if as_relay else owner) for line in step.expected]
        done = subprocess.run(
            ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
        )
        got = (done.stdout + done.stderr).splitlines()
        assert "Traceback" not in done.stderr, (command, done.stderr)
        assert matches(expected, got), (
            f"$ {command}\nthe page shows:\n{expected}\nit printed:\n{got}"
        )


def _grant_as_the_page_says(owner: str, sql_block: Block) -> None:
    with psycopg.connect(owner, autocommit=True) as conn:
        for role in ("relay", "shop"):
            exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone()
            if exists is None:
                conn.execute(f"CREATE ROLE {role} LOGIN")
        for statement in sql_block.text.split(";"):
            if statement.strip() and not statement.strip().startswith("CREATE ROLE"):
                conn.execute(statement)


def test_the_outbox_page_runs_as_written(
    postgres_server: PostgresServer, broker: BrokerProcess, tmp_path: Path
) -> None:
    owner = postgres_server.create_database(f"shop_{uuid.uuid4().hex[:10]}")
    relay = _role_url(owner, "relay")
    found = blocks(PAGE)
    consoles = [b for b in found if b.lang == "console"]
    (program,) = [b for b in found if b.lang == "python" and b.output is not None]
    (grants,) = [b for b in found if b.lang == "sql"]
    # Given the schema installed and the topic created, as the page's first console block
    _run_console(consoles[0], owner, relay, broker.address, tmp_path)
    _grant_as_the_page_says(owner, grants)
    # When the application's program runs, then it prints what the page shows
    script = tmp_path / "shop.py"
    script.write_text(program.text.replace(PAGE_URL, owner))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DEJAQ_")}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert matches(program.output.splitlines(), done.stdout.splitlines()), done.stdout  # type: ignore[union-attr]
    # And the rest of the console blocks print what the page shows, the relay and the
    # status under the relay role
    for block in consoles[1:]:
        _run_console(block, owner, relay, broker.address, tmp_path)


def test_the_application_role_of_the_page_may_write_rows(
    postgres_server: PostgresServer, tmp_path: Path
) -> None:
    # Given the outbox installed and the page's grants
    owner = postgres_server.create_database(f"shop_{uuid.uuid4().hex[:10]}")
    outbox.install(owner)
    (grants,) = [b for b in blocks(PAGE) if b.lang == "sql"]
    _grant_as_the_page_says(owner, grants)
    # When the application's role schedules; then its row waits
    with psycopg.connect(_role_url(owner, "shop")) as conn, conn.transaction():
        outbox.schedule(conn, "reminders", b"x", delay_ms=60_000)
    assert outbox.status(owner).waiting == 1
