"""Bad input against a real broker, the consume stream and calls by id: each
request gets the right gRPC status, changes nothing, and the broker keeps serving.
"""

from __future__ import annotations

from collections.abc import Awaitable

import grpc
import pytest

from dejaq.core.wire.batches import decode_deliveries
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.proto import dejaq_pb2 as pb
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.raw_calls import (
    INVALID,
    YEAR_10000_MS,
    Code,
    Stub,
    consume_raw,
    hello,
    status_of,
)
from tests.e2e.support import (
    assert_serves,
    consuming,
    create_topic,
    now_ms,
    produce_one,
)


@pytest.fixture
def broker(memory_broker: BrokerProcess) -> BrokerProcess:
    """Input checks do not depend on storage: the in-memory broker is enough."""
    return memory_broker


# -- consume: the stream protocol ---------------------------------------------


async def test_consume_must_open_with_hello(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a topic
    topic = await create_topic(client, topic_name)
    # When a Consume stream opens with credits, a settle, or an empty frame
    first_frames = [
        pb.ConsumeRequest(credits=10),
        pb.ConsumeRequest(settle=pb.Settle(ids=["a"], versions=[1])),
        pb.ConsumeRequest(),
    ]
    # Then each is INVALID_ARGUMENT
    for frame in first_frames:
        assert await status_of(consume_raw(stub, frame)) == INVALID, frame
    # and so is a stream closed before any frame
    call = stub.Consume()
    await call.done_writing()
    assert await status_of(call.read()) == INVALID
    assert (await Admin(client).describe_topic(topic)).consumers == 0
    await assert_serves(broker.address)


async def test_bad_credits_and_frames_abort_the_consume_stream(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a topic
    topic = await create_topic(client, topic_name)
    cases = {
        "hello with 0 credits": [hello(topic, credits=0)],
        "hello with a 1 ms lease": [hello(topic, credits=1, lease_ms=1)],
        "hello with a bad consumer id": [hello(topic, credits=1, consumer_id="no spaces")],
        "credits frame of 0": [hello(topic, credits=1), pb.ConsumeRequest(credits=0)],
        "a second hello": [hello(topic, credits=1), hello(topic, credits=1)],
        "an empty frame": [hello(topic, credits=1), pb.ConsumeRequest()],
    }
    for what, frames in cases.items():
        # When a stream sends it
        # Then the stream is aborted with INVALID_ARGUMENT
        assert await status_of(consume_raw(stub, *frames)) == INVALID, what
    assert (await Admin(client).describe_topic(topic)).consumers == 0
    await assert_serves(broker.address)


async def test_a_settle_frame_with_mismatched_ids_and_versions_aborts_the_stream(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a raw consumer holding a message
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    call = stub.Consume()
    await call.write(hello(topic, credits=1, lease_ms=60_000))
    assert (await call.read()).WhichOneof("frame") == "welcome"
    frame = await call.read()
    (d,), _ = decode_deliveries(frame.deliveries)
    assert d.id == mid
    # When it acks two ids quoting one version
    bad = pb.Settle(kind=pb.Settle.ACK, ids=[mid, mid], versions=[d.version], token=1)
    await call.write(pb.ConsumeRequest(settle=bad))
    # Then the stream is aborted with INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as info:
        while await call.read() is not grpc.aio.EOF:
            pass
    assert info.value.code() == INVALID
    # and the message is still there, unchanged
    m = (await Admin(client).get(topic, mid)).message
    assert (m.version, m.deliveries) == (d.version, 1)
    await assert_serves(broker.address)


async def test_a_settle_of_an_unknown_kind_aborts_the_stream(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a raw consumer
    topic = await create_topic(client, topic_name)
    # When it sends a settle of a kind that does not exist
    bad = pb.ConsumeRequest(settle=pb.Settle(kind=7, ids=["a"], versions=[1]))  # type: ignore[arg-type]
    # Then the stream is aborted with INVALID_ARGUMENT
    assert await status_of(consume_raw(stub, hello(topic, credits=1), bad)) == INVALID
    await assert_serves(broker.address)


# -- unary settles and mutations ----------------------------------------------


async def test_settling_a_message_one_does_not_hold_is_refused(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a message leased by a consumer
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    admin = Admin(client)
    async with consuming(client, topic, lease_ms=60_000) as inbox:
        d = await inbox.next()
        holder = inbox.consumer.consumer_id
        before = (await admin.get(topic, mid)).message

        def ack(id: str, version: int, consumer: str) -> Awaitable[object]:
            request = pb.AckRequest(topic=topic, id=id, version=version, consumer_id=consumer)
            return stub.Ack(request)

        # When another consumer acks, extends or nacks it
        # Then that is FAILED_PRECONDITION
        assert await status_of(ack(mid, d.version, "someone-else")) == Code.FAILED_PRECONDITION
        extend = pb.ExtendRequest(
            topic=topic, id=mid, version=d.version, consumer_id="someone-else", lease_ms=1_000
        )
        assert await status_of(stub.Extend(extend)) == Code.FAILED_PRECONDITION
        nack = pb.NackRequest(topic=topic, id=mid, version=d.version, consumer_id="someone-else")
        assert await status_of(stub.Nack(nack)) == Code.FAILED_PRECONDITION
        # When the holder quotes a wrong version: ABORTED
        assert await status_of(ack(mid, d.version + 1, holder)) == Code.ABORTED
        assert await status_of(ack(mid, d.version - 1, holder)) == Code.ABORTED
        # When the id is unknown: NOT_FOUND
        assert await status_of(ack("no-such-id", 1, holder)) == Code.NOT_FOUND
        # When the consumer id is malformed or the lease out of range: INVALID_ARGUMENT
        assert await status_of(ack(mid, d.version, "")) == INVALID
        short = pb.ExtendRequest(
            topic=topic, id=mid, version=d.version, consumer_id=holder, lease_ms=1
        )
        assert await status_of(stub.Extend(short)) == INVALID
        # Then nothing changed: the holder still holds it and can ack it
        after = (await admin.get(topic, mid)).message
        assert after == before
        await d.ack(confirm=True)
    await assert_serves(broker.address)


async def test_bad_arguments_to_calls_by_id_are_invalid(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a waiting message
    topic = await create_topic(client, topic_name)
    at = now_ms() + 60_000
    mid = await produce_one(client, topic, at)
    calls = {
        "move to a negative time": stub.Move(
            pb.MoveRequest(topic=topic, id=mid, version=1, timestamp_ms=-5)
        ),
        "move past year 9999": stub.Move(
            pb.MoveRequest(topic=topic, id=mid, version=1, timestamp_ms=YEAR_10000_MS)
        ),
        "get an empty id": stub.GetMessage(pb.GetMessageRequest(topic=topic, id="")),
        "get an over-long id": stub.GetMessage(pb.GetMessageRequest(topic=topic, id="i" * 257)),
        "cancel an empty id": stub.Cancel(pb.CancelRequest(topic=topic, id="", version=1)),
        "redrive to a negative time": stub.Redrive(pb.RedriveRequest(topic=topic, timestamp_ms=-1)),
    }
    # When each is called
    # Then each is INVALID_ARGUMENT
    for what, call in calls.items():
        assert await status_of(call) == INVALID, what
    # and the message did not move
    m = (await Admin(client).get(topic, mid)).message
    assert (m.timestamp, m.version) == (at, 1)
    await assert_serves(broker.address)
