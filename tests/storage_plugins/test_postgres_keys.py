"""Keys on postgresql:// beyond the shared contract: a database made before
keys is upgraded in place by ``dejaq storage migrate``."""

from __future__ import annotations

import json
import uuid

import psycopg

from dejaq.core.model import NewMessage
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.postgres import sql
from tests.postgres_server import PostgresServer
from tests.storage_plugins.test_postgres import NOW, T, opened
from tests.storage_plugins.test_postgres_priority import schema_at

BEFORE_KEYS = 5


async def test_a_database_from_before_keys_is_migrated_in_place(
    postgres_server: PostgresServer,
) -> None:
    # given a database of the format before keys, holding a message
    url = postgres_server.create_database(f"t_{uuid.uuid4().hex}")
    schema_at(url, BEFORE_KEYS)
    with psycopg.connect(url) as conn:
        settings = json.dumps({"buckets": 2, "lease_ms": 1000})
        conn.execute("INSERT INTO dejaq_topics VALUES (%s, %s, 7)", (T, settings))
        conn.execute(
            "INSERT INTO dejaq_messages (topic, id, bucket, ts, version, deliveries, owner,"
            " max_deliveries, expires_at, dead) VALUES (%s, 'old', 0, %s, 1, 0, NULL, 0, 0, false)",
            (T, NOW - 1),
        )
        conn.execute("INSERT INTO dejaq_payloads VALUES (%s, 'old', 'old')", (T,))
    # when migrated, then it is at this version and its message has no key and no headers
    newest = len(sql.MIGRATIONS)
    assert await storage_from_url(url).migrate() == (BEFORE_KEYS, newest, 0)
    async with opened(url) as storage:
        old = await storage.get(T, "old")
        assert (old.payload, old.key, old.headers) == (b"old", "", b"")
        # and keyed messages share a pass with it
        fresh = [NewMessage(f"k{i}", NOW - 5, b"", i % 2, key="k", headers=b"h") for i in range(9)]
        await storage.insert(T, fresh)
        request = LeaseRequest.of(T, None, NOW, 4, 1_000, "c1")
        leased = {(d.id, d.key) for d in (await storage.lease(request)).delivered}
        assert ("old", "") in leased and len(leased) == 4
    # and migrating again changes nothing
    assert await storage_from_url(url).migrate() == (newest, newest, 0)
