"""The outbox page, run as written against a real PostgreSQL and a broker
process: its console blocks and its program, the application's database in
place of the page's, and the relay under the role the page grants."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from dejaq import outbox
from tests.docs.examples import ROOT, Block, blocks
from tests.docs.page_runs import page_broker, page_env, run_console, run_program
from tests.e2e.broker_process import BrokerProcess
from tests.postgres_server import PostgresServer

PAGE = ROOT / "docs" / "outbox.md"
PAGE_URL = "postgresql://shop@127.0.0.1:5432/shop"
pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    with page_broker(tmp_path / "broker.log") as process:
        yield process


def _role_url(url: str, role: str) -> str:
    return re.sub(r"//[^@/]+@", f"//{role}@", url, count=1)


def _as_roles(owner: str, relay: str) -> Callable[[str], dict[str, str]]:
    """The page's database as the test's, the relay and the status reads run as
    the page's least-rights role."""

    def ours(command: str) -> dict[str, str]:
        as_relay = command.startswith(("dejaq outbox relay", "dejaq outbox status"))
        return {PAGE_URL: relay if as_relay else owner}

    return ours


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
    run_console(consoles[0], broker.address, tmp_path, _as_roles(owner, relay))
    _grant_as_the_page_says(owner, grants)
    # When the application's program runs, then it prints what the page shows
    run_program(program, {PAGE_URL: owner}, tmp_path, env=page_env())
    # And the rest of the console blocks print what the page shows, the relay and the
    # status under the relay role
    for block in consoles[1:]:
        run_console(block, broker.address, tmp_path, _as_roles(owner, relay))


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
