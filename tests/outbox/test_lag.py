"""The relay's lag: from the row's commit where the database keeps commit
times, else from its write."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from dejaq import outbox
from dejaq.driver import Client
from dejaq.outbox.driver_handoff import DriverHandOff
from dejaq.outbox.relay import Relay, RelayMetrics
from tests.outbox.conftest import HOUR_MS, TOPIC
from tests.postgres_server import PostgresServer, bin_dir, require_driver
from tests.servers import running

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def commit_times_server() -> Iterator[PostgresServer]:
    """A server of its own that keeps each transaction's commit time."""
    require_driver()
    with running(PostgresServer.create(bin_dir(), track_commit_timestamp="on")) as server:
        yield server


def written_an_hour_ago(url: str) -> None:
    """One row committed now, whose write the row says was an hour ago."""
    outbox.install(url)
    with psycopg.connect(url) as conn, conn.transaction():
        outbox.schedule(conn, TOPIC, b"x", delay_ms=HOUR_MS)
        conn.execute("UPDATE dejaq_outbox.rows SET written_at = now() - interval '1 hour'")


async def lag_observed(url: str, client: Client) -> tuple[float, float]:
    """(count, sum in seconds) of the lag histogram after relaying ``url``."""
    metrics = RelayMetrics()
    relay = Relay(url, DriverHandOff(client), metrics=metrics)
    try:
        assert await relay.drain() == 1
    finally:
        await relay.close()
    samples = {s.name: s.value for m in metrics.registry.collect() for s in m.samples}
    return samples["dejaq_outbox_relay_lag_seconds_count"], samples[
        "dejaq_outbox_relay_lag_seconds_sum"
    ]


async def test_the_lag_counts_from_the_commit_where_commit_times_are_kept(
    commit_times_server: PostgresServer, broker: Client
) -> None:
    # Given a server keeping commit times and a row committed now, written "an hour ago"
    url = commit_times_server.create_database("commits")
    written_an_hour_ago(url)
    # When it is relayed; then its lag counts from the commit: well under the hour
    count, total = await lag_observed(url, broker)
    assert count == 1 and total < 60


async def test_the_lag_counts_from_the_write_without_commit_times(
    app_db: str, broker: Client
) -> None:
    # Given a server keeping no commit times and the same row
    written_an_hour_ago(app_db)
    # When it is relayed; then its lag counts from the write: the hour
    count, total = await lag_observed(app_db, broker)
    assert count == 1 and total >= 3600
