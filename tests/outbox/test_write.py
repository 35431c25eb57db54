"""Scheduling in the application's transaction, through each driver's helper:
a commit delivers, a rollback never does."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable

import asyncpg
import psycopg
import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session

from dejaq import outbox
from dejaq.core.errors import InvalidArgument
from dejaq.driver import Admin, Client
from dejaq.outbox import sql
from tests.outbox.conftest import HOUR_MS, TOPIC, drain, on_topic
from tests.postgres_server import PostgresServer

pytestmark = pytest.mark.timeout(60)


class Rollback(Exception):
    """Raised inside the transaction to roll it back."""


def _sa(url: str, scheme: str) -> str:
    return url.replace("postgresql://", f"postgresql+{scheme}://", 1)


async def psycopg_sync(url: str, order: str, commit: bool) -> str:
    with psycopg.connect(url) as conn:
        try:
            with conn.transaction():
                conn.execute("INSERT INTO orders (id) VALUES (%s)", (order,))
                msg_id: str = outbox.schedule(conn, TOPIC, order.encode(), delay_ms=HOUR_MS)
                if not commit:
                    raise Rollback
        except Rollback:
            pass
    return msg_id


async def psycopg_async(url: str, order: str, commit: bool) -> str:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        try:
            async with conn.transaction():
                await conn.execute("INSERT INTO orders (id) VALUES (%s)", (order,))
                msg_id: str = await outbox.schedule(conn, TOPIC, order.encode(), delay_ms=HOUR_MS)
                if not commit:
                    raise Rollback
        except Rollback:
            pass
    return msg_id


async def with_asyncpg(url: str, order: str, commit: bool) -> str:
    conn = await asyncpg.connect(url)
    try:
        try:
            async with conn.transaction():
                await conn.execute("INSERT INTO orders (id) VALUES ($1)", order)
                msg_id: str = await outbox.schedule(conn, TOPIC, order.encode(), delay_ms=HOUR_MS)
                if not commit:
                    raise Rollback
        except Rollback:
            pass
    finally:
        await conn.close()
    return msg_id


async def sqlalchemy_session(url: str, order: str, commit: bool) -> str:
    engine = create_engine(_sa(url, "psycopg"))
    try:
        with Session(engine) as session:
            session.execute(text("INSERT INTO orders (id) VALUES (:id)"), {"id": order})
            msg_id: str = outbox.schedule(session, TOPIC, order.encode(), delay_ms=HOUR_MS)
            if commit:
                session.commit()
            else:
                session.rollback()
    finally:
        engine.dispose()
    return msg_id


async def sqlalchemy_async_session(url: str, order: str, commit: bool) -> str:
    from sqlalchemy.ext.asyncio import AsyncSession

    engine = create_async_engine(_sa(url, "psycopg"))
    try:
        async with AsyncSession(engine) as session:
            await session.execute(text("INSERT INTO orders (id) VALUES (:id)"), {"id": order})
            msg_id: str = await outbox.schedule(session, TOPIC, order.encode(), delay_ms=HOUR_MS)
            if commit:
                await session.commit()
            else:
                await session.rollback()
    finally:
        await engine.dispose()
    return msg_id


Writer = Callable[[str, str, bool], Awaitable[str]]
WRITERS: dict[str, Writer] = {
    "psycopg": psycopg_sync,
    "psycopg-async": psycopg_async,
    "asyncpg": with_asyncpg,
    "sqlalchemy": sqlalchemy_session,
    "sqlalchemy-async": sqlalchemy_async_session,
}


def orders(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        return [row[0] for row in conn.execute("SELECT id FROM orders ORDER BY id")]


@pytest.mark.parametrize("driver", WRITERS)
async def test_a_commit_delivers_the_message(driver: str, app_db: str, broker: Client) -> None:
    # Given an order and its reminder written in one transaction, committed
    msg_id = await WRITERS[driver](app_db, "order-17", True)
    # When the relay runs
    relayed = await drain(app_db, broker)
    # Then both the order and the message exist, the message due in an hour
    assert orders(app_db) == ["order-17"]
    assert relayed == 1
    info = await Admin(broker).get(TOPIC, msg_id)
    assert info.message.payload == b"order-17"
    assert outbox.status(app_db).waiting == 0


@pytest.mark.parametrize("driver", WRITERS)
async def test_a_rollback_never_delivers(driver: str, app_db: str, broker: Client) -> None:
    # Given an order and its reminder written in one transaction, rolled back
    msg_id = await WRITERS[driver](app_db, "order-18", False)
    # When the relay runs
    relayed = await drain(app_db, broker)
    # Then neither the order nor the message exists
    assert orders(app_db) == []
    assert relayed == 0
    assert not await on_topic(broker, msg_id)


def test_a_bad_field_is_refused_before_anything_is_written(app_db: str) -> None:
    # Given an open transaction
    with psycopg.connect(app_db) as conn, conn.transaction():
        # When a message with a time in epoch seconds, or a control character in
        # its key, is scheduled
        with pytest.raises(InvalidArgument, match="seconds"):
            outbox.schedule(conn, TOPIC, b"x", at_ms=1_800_000_000)
        with pytest.raises(InvalidArgument, match="control"):
            outbox.schedule(conn, TOPIC, b"x", key="a\nb")
        with pytest.raises(InvalidArgument, match="not both"):
            outbox.schedule(conn, TOPIC, b"x", at_ms=2_000_000_000_000, delay_ms=5)
    # Then nothing waits in the outbox
    assert outbox.status(app_db).waiting == 0


def test_an_unknown_connection_is_refused() -> None:
    with pytest.raises(InvalidArgument, match="psycopg 3"):
        outbox.schedule(object(), TOPIC, b"x")


def test_install_twice_changes_nothing(app_db: str) -> None:
    # Given an installed outbox; when installed again, then it says so
    again = outbox.install(app_db)
    assert again.before == again.after == len(sql.MIGRATIONS)


async def test_install_upgrades_an_outbox_of_the_first_version(
    postgres_server: PostgresServer, broker: Client
) -> None:
    # Given an outbox at version 1 with a message scheduled and cancelled waiting in it
    url = postgres_server.create_database(f"app_{uuid.uuid4().hex[:12]}")
    with psycopg.connect(url) as conn:
        conn.execute(sql.CREATE_SCHEMA)
        conn.execute(sql.CREATE_VERSION)
        conn.execute(sql.MIGRATIONS[0])
        conn.execute(sql.FIRST_VERSION, (1,))
        conn.commit()
        with conn.transaction():
            gone = outbox.schedule(conn, TOPIC, b"c", delay_ms=HOUR_MS)
        with conn.transaction():
            outbox.cancel(conn, TOPIC, gone)
    # When installed
    done = outbox.install(url)
    # Then it is at this version, the claim finds a message's rows by their index,
    # and the waiting rows relay in order
    assert (done.before, done.after) == (1, len(sql.MIGRATIONS))
    with psycopg.connect(url) as conn:
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(str(line) for (line,) in conn.execute("EXPLAIN " + sql.CLAIM, (10,)))
    assert "rows_message_seq" in plan
    assert await drain(url, broker) == 2
    assert not await on_topic(broker, gone)


async def test_key_and_headers_reach_the_topic(app_db: str, broker: Client) -> None:
    # Given a message written with a key and headers
    with psycopg.connect(app_db) as conn, conn.transaction():
        msg_id = outbox.schedule(
            conn,
            TOPIC,
            b"order 17",
            delay_ms=HOUR_MS,
            key="customer-9",
            headers={"content-type": "text/plain", "traceparent": "00-ab-cd-01"},
        )
    # When the relay runs; then the message on the topic carries both
    await drain(app_db, broker)
    info = await Admin(broker).get(TOPIC, msg_id)
    assert info.key == "customer-9"
    assert info.headers == {"content-type": "text/plain", "traceparent": "00-ab-cd-01"}
