"""What only the postgresql:// backend promises: several brokers on one database,
a schema it migrates itself, its URL options, and riding out a server restart."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import time
import uuid
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
import pytest

from dejaq.core.errors import InvalidArgument, NotFound, StorageError, StorageUnavailable
from dejaq.core.model import Counts, InsertStatus, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import storage_from_url
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.postgres import sql
from dejaq.storage_plugins.postgres.storage import PostgresStorage
from dejaq.storage_plugins.rules import Fate, lease_fate
from tests.postgres_server import PostgresServer, bin_dir
from tests.storage_plugins.opening import opened_as

T = "timeline"
NOW = 1_000_000
LEASE = 1_000
RECOVERY_DEADLINE_S = 30.0


def opened(url: str) -> AbstractAsyncContextManager[PostgresStorage]:
    return opened_as(PostgresStorage, url)


def msg(id: str, ts: int = NOW, bucket: int = 0) -> NewMessage:
    return NewMessage(id, ts, id.encode(), bucket)


async def given_topic(storage: PostgresStorage, buckets: int = 8) -> None:
    await storage.create_topic(Topic(T, TopicSettings(buckets=buckets), created_at_ms=7))


@pytest.fixture
def url(postgres_server: PostgresServer) -> str:
    """The shared database, emptied."""
    postgres_server.reset()
    return postgres_server.url()


@pytest.fixture
def fresh_url(postgres_server: PostgresServer) -> str:
    """A database of its own, without any dejaq table yet."""
    return postgres_server.create_database(f"t_{uuid.uuid4().hex}")


def applied_migrations(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(f"SELECT version FROM {sql.SCHEMA_TABLE} ORDER BY version")
        return [row[0] for row in rows]


# -- the lease fate spelled in SQL ------------------------------------------------


async def test_the_lease_statement_decides_fates_as_the_rules_do(url: str) -> None:
    # given due messages with every mix of deliveries so far, own max_deliveries
    # and expiry, on topics whose max_deliveries differ
    cases = list(
        itertools.product([0, 1, 2, 3], [0, 1, 2, 3], [0, NOW - 1, NOW, NOW + 1])
    )  # (deliveries, own max_deliveries, expires_at)
    async with opened(url) as storage:
        for topic_max in (0, 1, 3):
            topic = f"fates{topic_max}"
            await storage.create_topic(Topic(topic, TopicSettings(buckets=1)))
            await storage.insert(
                topic,
                [
                    NewMessage(f"m{i}", NOW - 1, b"p", 0, own, expires)
                    for i, (_, own, expires) in enumerate(cases)
                ],
            )
            async with storage._pool.connection() as conn:
                await conn.execute(
                    "UPDATE dejaq_messages SET deliveries = u.n FROM unnest(%s::text[],"
                    " %s::int[]) AS u (id, n) WHERE topic = %s AND dejaq_messages.id = u.id",
                    ([f"m{i}" for i in range(len(cases))], [c[0] for c in cases], topic),
                )
            # when one pass leases them all
            request = LeaseRequest.of(topic, None, NOW, 1000, LEASE, "c1", topic_max)
            delivered = {d.id for d in (await storage.lease(request)).delivered}
            # then each met the fate rules.lease_fate gives it
            for i, (deliveries, own, expires) in enumerate(cases):
                id = f"m{i}"
                try:
                    dead = (await storage.get(topic, id)).dead
                    fate = Fate.KILL if dead else Fate.KEEP
                except NotFound:
                    fate = Fate.DROP
                assert (id in delivered) == (fate is not Fate.KILL)
                expected = lease_fate(deliveries, own, topic_max, expires, NOW)
                assert fate is expected, (deliveries, own, topic_max, expires)


# -- schema ---------------------------------------------------------------------


async def test_opening_again_migrates_nothing_and_keeps_the_data(fresh_url: str) -> None:
    async with opened(fresh_url) as storage:
        await given_topic(storage)
        await storage.insert(T, [msg("m")])
    async with opened(fresh_url) as storage:
        assert (await storage.get(T, "m")).payload == b"m"
    assert applied_migrations(fresh_url) == list(range(1, len(sql.MIGRATIONS) + 1))


async def test_brokers_starting_together_migrate_once(fresh_url: str) -> None:
    # given four brokers opening an empty database at the same moment
    storages = [storage_from_url(fresh_url) for _ in range(4)]
    try:
        await asyncio.gather(*(s.open() for s in storages))
        # then every one works on the one schema, applied once
        await storages[0].create_topic(Topic(T))
        assert [t.name for t in await storages[3].list_topics()] == [T]
    finally:
        await asyncio.gather(*(s.close() for s in storages))
    assert applied_migrations(fresh_url) == list(range(1, len(sql.MIGRATIONS) + 1))


async def test_a_schema_from_a_newer_version_is_refused(fresh_url: str) -> None:
    async with opened(fresh_url):
        pass
    with psycopg.connect(fresh_url) as conn:
        conn.execute(sql.RECORD_MIGRATION, (len(sql.MIGRATIONS) + 1,))
    with pytest.raises(StorageError, match="newer"):
        await storage_from_url(fresh_url).open()
    newer = len(sql.MIGRATIONS) + 1
    with pytest.raises(StorageError, match=f"stored format version {newer}"):
        await storage_from_url(fresh_url).migrate()


async def test_migrate_reports_the_format_versions(fresh_url: str) -> None:
    newest = len(sql.MIGRATIONS)
    assert await storage_from_url(fresh_url).migrate() == (None, newest, 0)
    assert await storage_from_url(fresh_url).migrate() == (newest, newest, 0)
    assert applied_migrations(fresh_url) == list(range(1, newest + 1))


# -- URL options ----------------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "pool=3",
        "min_size=0",
        "min_size=many",
        "min_size=4&max_size=2",
        "pool_timeout=-1",
        "connect_timeout=0",
        "synchronous_commit=sometimes",
    ],
)
def test_a_bad_url_is_refused_when_the_backend_is_built(query: str) -> None:
    with pytest.raises(InvalidArgument):
        storage_from_url(f"postgresql://dejaq@localhost/dejaq?{query}")


SETTINGS = "SELECT current_setting('synchronous_commit'), current_setting('application_name')"


async def test_url_options_reach_every_session(url: str) -> None:
    query = "min_size=2&max_size=3&synchronous_commit=remote_apply&application_name=dejaq-test"
    async with opened(f"{url}?{query}") as storage:
        for _ in range(3):  # whichever pooled connection answers
            async with storage._pool.connection() as conn:
                cur = await conn.execute(SETTINGS)
                assert await cur.fetchone() == ("remote_apply", "dejaq-test")


# -- failures -------------------------------------------------------------------


async def test_a_failing_batch_stores_nothing(url: str) -> None:
    async with opened(url) as storage:
        await given_topic(storage)
        # given a batch whose last id is too large for the index
        huge = os.urandom(12_000).hex()
        with pytest.raises(StorageError) as raised:
            await storage.insert(T, [msg("good"), msg(huge)])
        # then it is a storage error, not a lost connection, and the batch left nothing
        assert not isinstance(raised.value, StorageUnavailable)
        assert isinstance(raised.value.__cause__, psycopg.Error)
        with pytest.raises(NotFound):
            await storage.get(T, "good")
        assert await storage.counts(T, NOW) == Counts()


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A server of the test's own, to stop and start."""
    server = PostgresServer.create(bin_dir())
    try:
        server.start()
        server.create_database("dejaq")
        yield server
    finally:
        server.destroy()


async def test_a_stopped_server_is_unavailable_then_recovers(own_server: PostgresServer) -> None:
    url = own_server.url() + "?min_size=2&max_size=4&pool_timeout=1&connect_timeout=1"
    async with opened(url) as storage:
        await given_topic(storage)
        assert await storage.insert(T, [msg("before")]) == [InsertStatus.ACCEPTED]
        # when the server stops
        own_server.stop()
        # then calls fail fast as unavailable, whatever connection they get
        async with asyncio.timeout(10):
            for _ in range(4):
                with pytest.raises(StorageUnavailable):
                    await storage.insert(T, [msg("during")])
            assert not await storage.healthy()
        # and once it is back (same port, same data) the storage recovers by itself
        own_server.start()
        deadline = time.monotonic() + RECOVERY_DEADLINE_S
        while not await storage.healthy():
            assert time.monotonic() < deadline, "no recovery after the restart"
            await asyncio.sleep(0.05)  # polling a condition under a deadline
        assert await storage.insert(T, [msg("after")]) == [InsertStatus.ACCEPTED]
        assert [
            d.id
            for d in (
                await storage.lease(LeaseRequest.of(T, None, NOW, 10, LEASE, "c", 0))
            ).delivered
        ] == [
            "before",
            "after",
        ]


async def test_an_unreachable_server_fails_open_as_unavailable(own_server: PostgresServer) -> None:
    own_server.stop()
    with pytest.raises(StorageUnavailable):
        await storage_from_url(own_server.url() + "?connect_timeout=1").open()


async def test_a_closed_storage_is_unavailable(url: str) -> None:
    storage = storage_from_url(url)
    await storage.open()
    assert await storage.healthy()
    await storage.close()
    assert not await storage.healthy()
    with pytest.raises(StorageUnavailable):
        await storage.list_topics()


# -- plans ----------------------------------------------------------------------

HOT: dict[str, tuple[str, dict[str, object], str]] = {
    "lease_topic": (
        sql.LEASE_TOPIC,
        {"topic": T, "buckets": None, "now": NOW, "bound": NOW, "window": 100, "limit": 100}
        | {"until": NOW + LEASE, "owner": "c1", "max_deliveries": 0},
        "dejaq_messages_time",
    ),
    "lease_buckets": (
        sql.LEASE_BUCKETS,
        {"topic": T, "buckets": list(range(64)), "now": NOW, "bound": NOW, "window": 100}
        | {"limit": 100, "until": NOW + LEASE, "owner": "c1", "max_deliveries": 0},
        "dejaq_messages_due",
    ),
    # A fair pass's step: here the unkeyed messages' share, by (key, bucket).
    "key_lease": (
        sql.KEY_LEASE,
        {"topic": T, "keys": [""] * 64, "buckets": list(range(64)), "ns": [10] * 64}
        | {"whole_keys": [], "whole_ns": []}
        | {"now": NOW, "bound": NOW, "window": 100, "limit": 100}
        | {"until": NOW + LEASE, "owner": "c1", "max_deliveries": 0},
        "dejaq_messages_key",
    ),
    # A fair pass over the whole topic: each key's share, one seek a key.
    "key_lease_whole": (
        sql.KEY_LEASE,
        {"topic": T, "keys": [], "buckets": [], "ns": []}
        | {"whole_keys": [f"k{i}" for i in range(10)], "whole_ns": [10] * 10}
        | {"now": NOW, "bound": NOW, "window": 100, "limit": 100}
        | {"until": NOW + LEASE, "owner": "c1", "max_deliveries": 0},
        "dejaq_messages_keyed",
    ),
    "fair_heads": (
        sql.FAIR_HEADS,
        {"topic": T, "buckets": list(range(64)), "bound": NOW},
        "dejaq_messages_key",
    ),
    # A fair pass over a whole topic: each key's head, one seek a key.
    "fair_key_heads": (
        sql.FAIR_KEY_HEADS,
        {"topic": T, "buckets": None, "bound": NOW},
        "dejaq_messages_keyed",
    ),
    "next_due": (sql.NEXT_DUE, {"topic": T}, "dejaq_messages_time"),
    "next_due_in_buckets": (
        sql.NEXT_DUE_IN_BUCKETS,
        {"topic": T, "buckets": list(range(64))},
        "dejaq_messages_due",
    ),
    "promote_topic": (
        sql.PROMOTE_TOPIC,
        {"topic": T, "created_at": 7, "settings": '{"buckets": 64}', "now": NOW, "limit": 100}
        | {"window": 100, "step": 1 << 35, "base": 1 << 46},
        "dejaq_messages_time",
    ),
    "promote_buckets": (
        sql.PROMOTE_BUCKETS,
        {"topic": T, "buckets": list(range(64)), "created_at": 7, "settings": '{"buckets": 64}'}
        | {"now": NOW, "limit": 100, "window": 100, "step": 1 << 35, "base": 1 << 46},
        "dejaq_messages_due",
    ),
    "lock_states": (
        sql.LOCK_STATES,
        {"topic": T, "ids": [f"m{i}" for i in range(100)]},
        "dejaq_messages_pkey",
    ),
    "apply_states": (
        sql.APPLY_STATES,
        {"topic": T, "now": NOW, "deleted": ["(0,1)"], "deleted_payloads": ["(0,1)"]}
        | {"tids": ["(0,2)"], "ts": [NOW]}
        | {"versions": [2], "deliveries": [1], "owners": [None], "deads": [False]},
        "",
    ),
    "ack_held": (
        sql.ACK_HELD,
        {"topic": T, "owner": "c1", "now": NOW, "ids": [f"m{i}" for i in range(100)]}
        | {"versions": [2] * 100},
        "dejaq_messages_pkey",
    ),
    "undo_tombstoned": (
        sql.UNDO_TOMBSTONED,
        {"topic": T, "ids": [f"m{i}" for i in range(100)]},
        "dejaq_messages_pkey",
    ),
    "purge_tombstones": (
        sql.PURGE_TOMBSTONES,
        {"topic": T, "deleted_before": NOW, "limit": 100},
        "dejaq_tombstones_age",
    ),
    "list_dead": (
        sql.LIST_DEAD,
        {"topic": T, "after_id": "", "limit": 10},
        "dejaq_messages_dead",
    ),
    "release": (
        sql.RELEASE_OWNER,
        {"topic": T, "owner": "c1", "now": NOW},
        "dejaq_messages_owner",
    ),
    "scan_bucket": (
        sql.SCAN_BUCKET,
        {"topic": T, "bucket": 3, "after_id": "m100", "limit": 1001},
        "dejaq_messages_bucket",
    ),
    "counts": (sql.COUNTS, {"topic": T, "now": NOW}, "dejaq_messages_time"),
    "by_due": (
        sql.BY_DUE,
        {"topic": T, "ts": NOW, "id": "m100", "limit": 50},
        "dejaq_messages_time",
    ),
}
MESSAGE_TABLES = ("dejaq_messages", "dejaq_payloads")


def _nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", []):
        yield from _nodes(child)


def _filters_by_key(node: dict[str, Any]) -> bool:
    """Does a plan node find messages or payloads by id through a filter (or a
    join) over the topic's rows, rather than by a key lookup or their ctid?"""
    if node["Node Type"] in ("Hash Join", "Merge Join"):
        return True
    if node["Node Type"] == "Seq Scan" and node["Relation Name"] in MESSAGE_TABLES:
        return True
    if "id =" in node.get("Filter", "") or "Join Filter" in node:
        return True
    if node.get("Relation Name") in MESSAGE_TABLES and node.get("Index Name", "").endswith("_pkey"):
        return "id =" not in node.get("Index Cond", "")
    return False


def _numbered(statement: str) -> tuple[str, list[str]]:
    """``statement`` with ``$1, $2...`` for its ``%(name)s`` (for PREPARE), and the names."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match[1] not in names:
            names.append(match[1])
        return f"${names.index(match[1]) + 1}"

    return re.sub(r"%\((\w+)\)s", number, statement), names


def _type_of(value: object) -> str:
    """The SQL type psycopg sends a parameter as (near enough for planning)."""
    if isinstance(value, list):
        first = next((v for v in value if v is not None), "")
        return _type_of(first) + "[]"
    return {bool: "bool", int: "int8"}.get(type(value), "text")


def _prepare(conn: psycopg.Connection[Any], name: str, statement: str) -> list[str]:
    """PREPARE ``statement`` as the backend's sessions run it; its parameter names."""
    text, names = _numbered(statement)
    types = ", ".join(_type_of(HOT[name][1][key]) for key in names)
    conn.execute(f"PREPARE {name} ({types}) AS {text}")
    return names


def _plan(conn: psycopg.Connection[Any], name: str, names: list[str]) -> dict[str, Any]:
    """The plan of prepared statement ``name`` run with its ``HOT`` parameters."""
    # EXECUTE's arguments are bound client-side: a utility statement cannot
    # infer the type of a server-side parameter.
    holes = ", ".join(["%s"] * len(names))
    values = [HOT[name][1][key] for key in names]
    explain = f"EXPLAIN (FORMAT JSON) EXECUTE {name} ({holes})"
    [[document]] = psycopg.ClientCursor(conn).execute(explain, values).fetchall()
    return (document if isinstance(document, list) else json.loads(document))[0]["Plan"]


def _assert_seeks(name: str, plan: dict[str, Any]) -> None:
    nodes = list(_nodes(plan))
    index = HOT[name][2]
    assert not index or any(node.get("Index Name") == index for node in nodes), (name, plan)
    assert not any(_filters_by_key(node) for node in nodes), (name, plan)


async def _load_burst(url: str, *, analyze_before: bool, create: bool = True) -> None:
    """A topic with 20,000 messages all due (the campaign burst). With
    ``analyze_before``, planner statistics exist, gathered before the topic
    came (another topic's): the planner then believes the topic is empty —
    what made the first lease passes of a new topic scan all its rows."""
    async with opened(url) as storage:
        if analyze_before:
            await storage.create_topic(Topic("other", TopicSettings(buckets=64)))
            older = [msg(f"o{i}", NOW + 10**6 + i, bucket=i % 64) for i in range(20_000)]
            await storage.insert("other", older)
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE")
        if create:
            await given_topic(storage, buckets=64)
        for start in range(0, 20_000, 5_000):
            ids = range(start, start + 5_000)
            await storage.insert(T, [msg(f"m{i}", NOW - i, bucket=i % 64) for i in ids])


@pytest.fixture(scope="module", params=["no-statistics", "statistics-without-the-topic"])
def burst_url(request: pytest.FixtureRequest, postgres_server: PostgresServer) -> str:
    url = postgres_server.create_database(f"t_{uuid.uuid4().hex}")
    asyncio.run(_load_burst(url, analyze_before=request.param != "no-statistics"))
    return url


@pytest.mark.parametrize("name", list(HOT))
def test_hot_statements_seek_their_rows(burst_url: str, name: str) -> None:
    # when a hot statement is planned, as the backend's sessions run it, on a
    # topic its statistics miss
    with psycopg.connect(burst_url) as conn:
        conn.execute(sql.SESSION_SETUP)
        plan = _plan(conn, name, _prepare(conn, name, HOT[name][0]))
    # then it seeks its rows through its index, by key or by ctid: no scan of the topic
    _assert_seeks(name, plan)


def test_a_scan_page_reads_its_bucket_in_id_order_and_stops(burst_url: str) -> None:
    # when a scan page is planned on a topic its statistics miss
    with psycopg.connect(burst_url) as conn:
        conn.execute(sql.SESSION_SETUP)
        plan = _plan(conn, "scan_bucket", _prepare(conn, "scan_bucket", sql.SCAN_BUCKET))
    # then one ordered seek of the bucket's ids after the cursor feeds the
    # LIMIT: no sort of the bucket's rows for each page (a bucket's read
    # quadratic in its size), no walk of the topic's ids filtering the bucket
    assert plan["Node Type"] == "Limit", plan
    [scan] = plan["Plans"]
    assert (scan["Node Type"], scan.get("Index Name")) == ("Index Scan", "dejaq_messages_bucket")
    assert "id ~>~" in scan["Index Cond"] and "Filter" not in scan, scan
    assert not any(node["Node Type"] == "Sort" for node in _nodes(plan)), plan


def test_the_one_statement_ack_deletes_in_the_order_of_ids(burst_url: str) -> None:
    # when the one-statement ack is planned on a topic its statistics miss
    with psycopg.connect(burst_url) as conn:
        conn.execute(sql.SESSION_SETUP)
        plan = _plan(conn, "ack_held", _prepare(conn, "ack_held", sql.ACK_HELD))
    # then it deletes the messages one at a time, walking its rows in the order
    # of the ids: its row locks come in LOCK_STATES' order (the two cannot
    # deadlock), not in ctid order as a list of ctids would take them
    [delete] = [
        node
        for node in _nodes(plan)
        if node.get("Operation") == "Delete" and node.get("Relation Name") == "dejaq_messages"
    ]
    [loop] = [p for p in delete["Plans"] if p.get("Parent Relationship") == "Outer"]
    assert loop["Node Type"] == "Nested Loop", loop
    outer, inner = loop["Plans"]
    assert (outer["Node Type"], outer.get("CTE Name")) == ("CTE Scan", "held"), loop
    assert inner["Node Type"] == "Tid Scan", loop


def test_hot_statements_prepared_on_an_empty_topic_still_seek_once_it_fills(
    postgres_server: PostgresServer,
) -> None:
    # given every hot statement prepared while the topic was empty
    url = postgres_server.create_database(f"t_{uuid.uuid4().hex}")

    async def empty_topic() -> None:
        async with opened(url) as storage:
            await given_topic(storage, buckets=64)

    asyncio.run(empty_topic())
    with psycopg.connect(url) as conn:
        conn.execute(sql.SESSION_SETUP)
        prepared = {
            name: _prepare(conn, name, statement) for name, (statement, _, _) in HOT.items()
        }
        for name, names in prepared.items():
            _plan(conn, name, names)  # and run once, as a broker's first pass would
        # when the topic fills with a burst
        asyncio.run(_load_burst(url, analyze_before=False, create=False))
        # then each still seeks its rows
        for name, names in prepared.items():
            _assert_seeks(name, _plan(conn, name, names))


# -- tombstones ---------------------------------------------------------------


async def test_a_resend_racing_the_ack_of_its_id_is_a_duplicate(url: str) -> None:
    # Given a stored message, and an ack of it in flight: its transaction has
    # deleted the row and written the tombstone, and not committed yet
    storage = storage_from_url(url)
    await storage.open()
    try:
        await storage.create_topic(Topic(T, TopicSettings(buckets=4)))
        assert await storage.insert(T, [msg("m")]) == [InsertStatus.ACCEPTED]
        async with await psycopg.AsyncConnection.connect(url) as ack:
            async with ack.transaction():
                await ack.execute("DELETE FROM dejaq_messages WHERE topic = %s AND id = 'm'", (T,))
                await ack.execute("DELETE FROM dejaq_payloads WHERE topic = %s AND id = 'm'", (T,))
                await ack.execute(
                    "INSERT INTO dejaq_tombstones (topic, id, deleted_at) VALUES (%s, 'm', %s)",
                    (T, NOW),
                )
                # When a resend of the id arrives meanwhile (it waits for the ack)
                resend = asyncio.create_task(storage.insert(T, [msg("m", NOW + 1)]))
                await _until_waiting_for_a_lock(ack)
            # and the ack commits
            # Then the resend is a duplicate and stores nothing
            assert await resend == [InsertStatus.DUPLICATE]
        with pytest.raises(NotFound):
            await storage.get(T, "m")
    finally:
        await storage.close()


async def _until_waiting_for_a_lock(conn: psycopg.AsyncConnection[Any]) -> None:
    """Poll (bounded) until another session waits for a lock."""
    deadline = time.monotonic() + 10
    query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
    while True:
        async with await psycopg.AsyncConnection.connect(conn.info.dsn) as probe:
            row = await (await probe.execute(query)).fetchone()
        if row is not None and row[0] > 0:
            return
        assert time.monotonic() < deadline, "the resend never waited for the ack"
        await asyncio.sleep(0.02)  # polling a condition under a deadline
