"""Counts on postgresql:// beyond the shared contract: every write adds what it
changed to ``dejaq_counts``, the census sums those rows up, and a database made
before it is counted when this version first opens it."""

from __future__ import annotations

import json
import uuid

import psycopg

from dejaq.core.model import Counts, NewMessage
from dejaq.storage_plugins.base import LeaseRequest
from tests.postgres_server import PostgresServer
from tests.storage_plugins.test_postgres_priority import opened, schema_at

NOW = 1_700_000_000_000


# The format version before dejaq_counts.
BEFORE_COUNTS = 4


def counts_rows(url: str) -> list[tuple[str, int, int]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT topic, live, dead FROM dejaq_counts ORDER BY topic").fetchall()
    return [(topic, int(live), int(dead)) for topic, live, dead in rows]


async def test_a_database_from_before_the_counts_is_counted_when_opened(
    postgres_server: PostgresServer,
) -> None:
    # Given a database of the schema before the counts, holding live and dead messages
    url = postgres_server.create_database(f"t_{uuid.uuid4().hex}")
    schema_at(url, BEFORE_COUNTS)
    with psycopg.connect(url) as conn:
        conn.execute(
            "INSERT INTO dejaq_topics VALUES ('old', %s, 7)", (json.dumps({"buckets": 2}),)
        )
        for i, dead in enumerate((False, False, True)):
            conn.execute(
                "INSERT INTO dejaq_messages (topic, id, bucket, ts, version, deliveries,"
                " owner, max_deliveries, expires_at, dead)"
                " VALUES ('old', %s, 0, %s, 1, 0, NULL, 0, 0, %s)",
                (f"m{i}", NOW + 1000, dead),
            )
            conn.execute("INSERT INTO dejaq_payloads VALUES ('old', %s, '')", (f"m{i}",))
    # When this dejaq opens it
    async with opened(url) as storage:
        # Then its messages are counted, and counted on as they change
        assert counts_rows(url) == [("old", 2, 1)]
        assert await storage.counts("old", NOW) == Counts(waiting=2, dead=1)
        await storage.insert("old", [NewMessage("new", NOW - 1, b"", 1, max_deliveries=1)])
        leased = await storage.lease(LeaseRequest.of("old", None, NOW, 10, 1000, "c"))
        assert [d.id for d in leased.delivered] == ["new"]  # at most once: deleted
        assert await storage.redrive("old", None, NOW + 5000) == 1
        assert await storage.counts("old", NOW) == Counts(waiting=3)
        # and the census folds the rows each write added into one
        assert (await storage.census(NOW))["old"].counts == Counts(waiting=3)
        assert counts_rows(url) == [("old", 3, 0)]
