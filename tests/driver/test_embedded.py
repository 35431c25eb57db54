"""``embedded()``: a real broker in the test's own event loop, on memory and
SQLite, reached through the ``Client`` it yields."""

from __future__ import annotations

from pathlib import Path

import pytest

from dejaq.core.model import Counts
from dejaq.driver import (
    Admin,
    BrokerUnavailable,
    Client,
    Consumer,
    Delivery,
    InvalidArgument,
    Producer,
    embedded,
)

pytestmark = pytest.mark.timeout(60)
HOUR_MS = 3_600_000


async def first_delivery(client: Client, topic: str) -> Delivery:
    """The first message a consumer of ``topic`` gets, acked and confirmed."""
    async with Consumer(client, topic) as consumer:
        async for delivery in consumer:
            await delivery.ack(confirm=True)
            return delivery
    raise AssertionError("the consumer ended without a delivery")


@pytest.mark.parametrize("scheme", ["memory", "sqlite"])
async def test_produce_consume_ack(scheme: str, tmp_path: Path) -> None:
    url = "memory://" if scheme == "memory" else f"sqlite:///{tmp_path / 'jobs.db'}"
    # Given an embedded broker on the storage and a topic
    async with embedded(url) as client:
        assert client.address.startswith("127.0.0.1:") and not client.address.endswith(":0")
        await Admin(client).create_topic("jobs")
        # When a message is produced and consumed, and the consumer acks it
        async with Producer(client, "jobs") as producer:
            await producer.send(b"resize photo 17", id="job-17")
        got = await first_delivery(client, "jobs")
        # Then it was the message, and it is gone
        assert (got.id, got.payload) == ("job-17", b"resize photo 17")
        assert (await Admin(client).describe_topic("jobs")).counts == Counts()
        address = client.address
    # and once the block is left, nothing listens there any more
    async with Client(address, 2.0, tls=False) as late:
        with pytest.raises(BrokerUnavailable):
            await Admin(late).list_topics()


async def test_a_restart_on_the_same_sqlite_file_keeps_the_messages(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    # Given messages produced through one embedded broker, now stopped
    async with embedded(url) as client:
        await Admin(client).create_topic("jobs")
        async with Producer(client, "jobs") as producer:
            await producer.send(b"now", id="due")
            await producer.send(b"later", id="later", delay_ms=HOUR_MS)
    # When another starts on the same file
    async with embedded(url) as client:
        # Then both messages are there, and the due one is delivered
        admin = Admin(client)
        assert [t.name for t in await admin.list_topics()] == ["jobs"]
        assert (await admin.get("jobs", "later")).message.payload == b"later"
        got = await first_delivery(client, "jobs")
        assert (got.id, got.payload) == ("due", b"now")


async def test_a_bad_url_or_setting_is_refused_before_anything_starts() -> None:
    with pytest.raises(InvalidArgument, match="unknown storage URL 'mongodb://x'"):
        async with embedded("mongodb://x"):
            raise AssertionError("no broker may start on it")
    with pytest.raises(InvalidArgument, match="unknown setting 'rescan'"):
        async with embedded(rescan=5):
            raise AssertionError("no broker may start with it")
    with pytest.raises(InvalidArgument, match="rescan_ms must be positive"):
        async with embedded(rescan_ms=0):
            raise AssertionError("no broker may start with it")
