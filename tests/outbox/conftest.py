"""An application database with the outbox installed, and a broker to relay to."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest

from dejaq import outbox
from dejaq.driver import Admin, Client, embedded
from dejaq.outbox.driver_handoff import DriverHandOff
from dejaq.outbox.relay import Relay
from tests.postgres_server import PostgresServer

TOPIC = "reminders"
HOUR_MS = 3_600_000


@pytest.fixture
def app_db(postgres_server: PostgresServer) -> str:
    """A fresh database of the application's, with its own ``orders`` table and
    the outbox installed."""
    url = postgres_server.create_database(f"app_{uuid.uuid4().hex[:12]}")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id text PRIMARY KEY)")
    outbox.install(url)
    return url


@pytest.fixture
async def broker() -> AsyncIterator[Client]:
    """A broker in the test's loop with the topic ``reminders``."""
    async with embedded("memory://") as client:
        await Admin(client).create_topic(TOPIC)
        yield client


async def drain(url: str, client: Client) -> int:
    """Everything committed in the outbox at ``url`` relayed once; how many rows."""
    relay = Relay(url, DriverHandOff(client))
    try:
        return await relay.drain()
    finally:
        await relay.close()


async def on_topic(client: Client, id: str, topic: str = TOPIC) -> bool:
    """Whether message ``id`` is on ``topic``."""
    from dejaq.driver import NotFound

    try:
        await Admin(client).get(topic, id)
    except NotFound:
        return False
    return True
