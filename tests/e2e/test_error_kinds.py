"""Error kinds on a live broker: the class travels beside the code, not in the text.

``Leased`` and ``NotLeaseHolder`` share FAILED_PRECONDITION and both texts say
"leased by": the driver tells them apart by the kind the broker sends (trailing
metadata of a failed call, ``Rejection.kind`` in a stream frame).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest

from dejaq.core.errors import Leased, NotLeaseHolder, StaleVersion
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.settle import SettleRejected
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import consuming, create_topic, now_ms, produce_one


@pytest.fixture
async def memory_client(memory_broker: BrokerProcess) -> AsyncIterator[Client]:
    async with Client(memory_broker.address) as c:
        yield c


async def test_a_failed_call_names_its_kind_in_trailing_metadata(
    memory_client: Client, stub: pb_grpc.TimelineStub, topic_name: str
) -> None:
    # Given a message leased by a consumer
    topic = await create_topic(memory_client, topic_name)
    mid = await produce_one(memory_client, topic, now_ms())
    async with consuming(memory_client, topic, lease_ms=60_000) as inbox:
        d = await inbox.next()
        # When another consumer acks it, and the producer moves it, over raw gRPC
        with pytest.raises(grpc.aio.AioRpcError) as ack:
            await stub.Ack(pb.AckRequest(topic=topic, id=mid, version=d.version, consumer_id="x"))
        with pytest.raises(grpc.aio.AioRpcError) as move:
            await stub.Move(
                pb.MoveRequest(topic=topic, id=mid, version=d.version, timestamp_ms=now_ms())
            )
        # Then both are FAILED_PRECONDITION, told apart by the kind
        assert ack.value.code() == move.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert ("dejaq-error-kind", "NotLeaseHolder") in tuple(ack.value.trailing_metadata())
        assert ("dejaq-error-kind", "Leased") in tuple(move.value.trailing_metadata())
        await d.ack(confirm=True)


async def test_the_driver_raises_each_class_from_unary_calls_and_settle_frames(
    memory_client: Client, topic_name: str
) -> None:
    # Given a message leased by consumer A
    topic = await create_topic(memory_client, topic_name)
    mid = await produce_one(memory_client, topic, now_ms())
    admin = Admin(memory_client)
    async with consuming(memory_client, topic, lease_ms=60_000, consumer_id="a") as inbox:
        d = await inbox.next()
        # When someone else acks it: NotLeaseHolder (its text says "not leased by")
        with pytest.raises(NotLeaseHolder) as not_holder:
            await admin.ack(topic, mid, d.version, "b")
        assert type(not_holder.value) is NotLeaseHolder
        assert "leased by" in str(not_holder.value)
        # When the producer cancels it: Leased
        with pytest.raises(Leased):
            await admin.cancel(topic, mid, d.version)
        # When the holder acks a stale version in a settle frame: StaleVersion
        real = d.version
        d.version = real + 7
        with pytest.raises(StaleVersion):
            await d.ack(confirm=True)
        # And an unconfirmed refusal reaches flush() as the same class
        await d.nack(confirm=False)
        with pytest.raises(SettleRejected) as rejected:
            await inbox.consumer.flush()
        assert [type(f.error) for f in rejected.value.failures] == [StaleVersion]
        d.version = real
        await d.ack(confirm=True)
