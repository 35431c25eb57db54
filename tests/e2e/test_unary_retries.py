"""Unary mutations are never resent once they reached a broker.

A stand-in broker (an in-process gRPC servicer of our own Timeline service)
counts the calls it gets and answers UNAVAILABLE, as a broker does that fails
after applying a call: the driver must not try the next broker with the same
version-quoting mutation. A broker that cannot be connected to at all is
skipped: the call surely never left.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest

from dejaq.core.errors import BrokerUnavailable
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.proto import dejaq_pb2_grpc as pb_grpc
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import consuming, create_topic, now_ms, produce_one


class Unavailable(pb_grpc.TimelineServicer):
    """Answers every call it gets UNAVAILABLE, counting them by method."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = {}

    async def _refuse(self, method: str, context: Any) -> Any:
        self.calls[method] = self.calls.get(method, 0) + 1
        await context.abort(grpc.StatusCode.UNAVAILABLE, "going away")

    async def Ack(self, request: Any, context: Any) -> Any:
        return await self._refuse("Ack", context)

    async def Move(self, request: Any, context: Any) -> Any:
        return await self._refuse("Move", context)

    async def Cancel(self, request: Any, context: Any) -> Any:
        return await self._refuse("Cancel", context)

    async def GetMessage(self, request: Any, context: Any) -> Any:
        return await self._refuse("GetMessage", context)


@pytest.fixture
async def stand_in() -> AsyncIterator[tuple[str, Unavailable]]:
    servicer = Unavailable()
    server = grpc.aio.server()
    pb_grpc.add_TimelineServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        yield f"127.0.0.1:{port}", servicer
    finally:
        await server.stop(None)


def closed_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


async def test_a_mutation_that_reached_a_broker_is_not_resent(
    memory_broker: BrokerProcess, stand_in: tuple[str, Unavailable], topic_name: str
) -> None:
    fake, servicer = stand_in
    async with Client(memory_broker.address) as direct:
        topic = await create_topic(direct, topic_name)
        waiting = await produce_one(direct, topic, now_ms() + 3_600_000)
        due = await produce_one(direct, topic, now_ms())
        admin = Admin(direct)
        version = (await admin.get(topic, waiting)).message.version
        async with consuming(direct, topic, lease_ms=60_000, consumer_id="c") as inbox:
            d = await inbox.next()
            assert d.id == due
            # Given a client whose first broker fails every call after getting it
            async with Client([fake, memory_broker.address], timeout_s=5) as client:
                other = Admin(client)
                # When ack, move and cancel meet UNAVAILABLE there
                with pytest.raises(BrokerUnavailable, match="may or may not have been applied"):
                    await other.ack(topic, due, d.version, "c")
                with pytest.raises(BrokerUnavailable, match="may or may not"):
                    await other.move(topic, waiting, version, now_ms() + 7_200_000)
                with pytest.raises(BrokerUnavailable, match="may or may not"):
                    await other.cancel(topic, waiting, version)
            # Then each was sent once, and never to the second broker
            assert servicer.calls == {"Ack": 1, "Move": 1, "Cancel": 1}
            assert (await admin.get(topic, waiting)).message.version == version
            held = (await admin.get(topic, due)).message
            assert (held.version, held.lease_owner) == (d.version, "c")
            await d.ack(confirm=True)


async def test_reads_are_retried_on_the_next_broker(
    memory_broker: BrokerProcess, stand_in: tuple[str, Unavailable], topic_name: str
) -> None:
    fake, servicer = stand_in
    async with Client(memory_broker.address) as direct:
        topic = await create_topic(direct, topic_name)
        mid = await produce_one(direct, topic, now_ms() + 60_000)
    async with Client([fake, memory_broker.address], timeout_s=5) as client:
        info = await Admin(client).get(topic, mid)
    assert info.message.id == mid
    assert servicer.calls == {"GetMessage": 1}


async def test_a_mutation_skips_a_broker_it_cannot_connect_to(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    # Given a client whose first broker is down (nothing listens on its port)
    async with Client([closed_port(), memory_broker.address], timeout_s=5) as client:
        topic = await create_topic(client, topic_name)
        mid = await produce_one(client, topic, now_ms() + 60_000)
        admin = Admin(client)
        version = (await admin.get(topic, mid)).message.version
        await client.failover()  # point at the dead broker again
        # When a move is sent: the dead broker never got it, so the next one does
        moved = await admin.move(topic, mid, version, now_ms() + 120_000)
        # Then it was applied exactly once
        assert moved.version == version + 1
        assert (await admin.get(topic, mid)).message.version == version + 1
