"""Bad input against a real broker, topics and produce: each request gets the
right gRPC status, changes nothing, and the broker keeps serving. Most requests
go through a raw gRPC stub (``raw_calls``): they are what the driver would never send.
"""

from __future__ import annotations

import random
import struct

import flatbuffers
import grpc
import numpy as np
import pytest

from dejaq.core.errors import NotFound
from dejaq.core.wire.batches import decode_results, encode_messages
from dejaq.core.wire.status import MAX_DETAILS_BYTES
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Producer
from dejaq.fbs.batch import MessageBatch
from dejaq.proto import dejaq_pb2 as pb
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.raw_calls import (
    ACCEPTED,
    INVALID,
    REJECTED,
    YEAR_10000_MS,
    Code,
    Stub,
    consume_raw,
    hello,
    produce_raw,
    status_of,
    topic_names,
)
from tests.e2e.support import (
    EMPTY,
    assert_serves,
    counts,
    create_topic,
    now_ms,
)


@pytest.fixture
def broker(memory_broker: BrokerProcess) -> BrokerProcess:
    """Input checks do not depend on storage: the in-memory broker is enough."""
    return memory_broker


# -- topics -------------------------------------------------------------------

BAD_NAMES = {
    "empty": "",
    "over-long": "t" * 201,
    "ten-thousand-characters": "t" * 10_000,  # echoed whole, over gRPC's 8 KiB of headers
    "leading-dash": "-topic",
    "space": "my topic",
    "slash": "a/b",
    "non-ascii": "tópico",
}


@pytest.mark.parametrize("name", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
async def test_a_bad_topic_name_is_an_invalid_argument_everywhere(
    stub: Stub, client: Client, broker: BrokerProcess, name: str
) -> None:
    # Given a topic name that breaks the naming rule
    before = await topic_names(client)
    # When it is used to create, describe, produce to and consume from a topic
    # Then each is refused as INVALID_ARGUMENT
    assert await status_of(stub.CreateTopic(pb.CreateTopicRequest(name=name))) == INVALID
    assert await status_of(stub.DescribeTopic(pb.DescribeTopicRequest(name=name))) == INVALID
    batch = encode_messages([now_ms()], [b"x"], ["a"])
    assert await status_of(produce_raw(stub, name, batch)) == INVALID
    assert await status_of(consume_raw(stub, hello(name, credits=1))) == INVALID
    # and nothing was created
    assert await topic_names(client) == before
    await assert_serves(broker.address)


@pytest.mark.parametrize("name", ["t" * 10_000, "é" * 10_000], ids=["ascii", "accented"])
async def test_a_huge_name_is_refused_with_the_error_and_its_echo_cut(
    stub: Stub, name: str
) -> None:
    # Given a topic name far over the limit
    # When a stock gRPC client creates a topic of that name
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.CreateTopic(pb.CreateTopicRequest(name=name))
    # Then it gets the error itself (not gRPC's own RESOURCE_EXHAUSTED for the
    # status's size): what is wrong, with the name echoed cut short
    assert refused.value.code() == INVALID
    details = refused.value.details() or ""
    assert details.startswith(f"topic name '{name[:100]}")
    assert details.endswith(
        "' must be 1-200 characters of letters, digits, '.', '_' or '-',"
        " starting with a letter or digit"
    )
    assert "characters cut]" in details
    assert len(details.encode()) <= MAX_DETAILS_BYTES


async def test_an_unknown_topic_is_not_found(
    stub: Stub, client: Client, broker: BrokerProcess
) -> None:
    # Given a topic that does not exist
    name = "no-such-topic"
    # When it is produced to, consumed from, described, or a message of it read
    # Then each is NOT_FOUND
    batch = encode_messages([now_ms()], [b"x"], ["a"])
    assert await status_of(produce_raw(stub, name, batch)) == Code.NOT_FOUND
    assert await status_of(consume_raw(stub, hello(name, credits=1))) == Code.NOT_FOUND
    assert await status_of(stub.DescribeTopic(pb.DescribeTopicRequest(name=name))) == (
        Code.NOT_FOUND
    )
    get = stub.GetMessage(pb.GetMessageRequest(topic=name, id="a"))
    assert await status_of(get) == Code.NOT_FOUND
    assert await status_of(stub.ListDead(pb.ListDeadRequest(topic=name))) == Code.NOT_FOUND
    # and the driver raises NotFound for each
    with pytest.raises(NotFound):
        async with Producer(client, name) as producer:
            await producer.send(b"x")
    with pytest.raises(NotFound):
        await Consumer(client, name).start()
    with pytest.raises(NotFound):
        await Admin(client).describe_topic(name)
    # and it was not created on the way
    assert name not in await topic_names(client)
    await assert_serves(broker.address)


BAD_SETTINGS = {
    "100000 buckets": pb.TopicSettings(buckets=100_000),
    "1 ms lease": pb.TopicSettings(lease_ms=1),
    "8 day lease": pb.TopicSettings(lease_ms=8 * 24 * 3600 * 1000),
    "1 GiB payloads": pb.TopicSettings(max_payload_bytes=1 << 30),
    # Past any representable time: due + expiry or now - retention overflow int64.
    "uint64-max expiry": pb.TopicSettings(expiry_ms=2**64 - 1),
    "uint64-max dead retention": pb.TopicSettings(dead_retention_ms=2**64 - 1),
}


@pytest.mark.parametrize("settings", list(BAD_SETTINGS.values()), ids=list(BAD_SETTINGS))
async def test_bad_topic_settings_are_an_invalid_argument(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str, settings: pb.TopicSettings
) -> None:
    # When a topic is created with settings out of range
    request = pb.CreateTopicRequest(name=topic_name, settings=settings)
    # Then it is refused and not created
    assert await status_of(stub.CreateTopic(request)) == INVALID
    assert topic_name not in await topic_names(client)
    await assert_serves(broker.address)


async def test_a_duplicate_topic_already_exists(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a topic with a 5 s lease
    await stub.CreateTopic(
        pb.CreateTopicRequest(name=topic_name, settings=pb.TopicSettings(lease_ms=5_000))
    )
    # When it is created again, with other settings
    again = pb.CreateTopicRequest(name=topic_name, settings=pb.TopicSettings(lease_ms=9_000))
    # Then that is ALREADY_EXISTS and the first settings stand
    assert await status_of(stub.CreateTopic(again)) == Code.ALREADY_EXISTS
    info = await Admin(client).describe_topic(topic_name)
    assert info.topic.settings.lease_ms == 5_000
    await assert_serves(broker.address)


# -- produce: per-message rejections -------------------------------------------


async def test_absurd_timestamps_are_rejected_per_message(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a batch mixing good timestamps with negative and past-year-9999 ones
    topic = await create_topic(client, topic_name)
    later = now_ms() + 60_000
    stamps = [later, -1, YEAR_10000_MS, later + 1, 2**63 - 1, -(2**63)]
    ids = ["ok-1", "negative", "year-10000", "ok-2", "int64-max", "int64-min"]
    # When it is produced
    response = await produce_raw(stub, topic, encode_messages(stamps, [b""] * 6, ids))
    # Then the absurd ones are rejected as INVALID_ARGUMENT and the rest accepted
    status, _ = decode_results(response.results)
    assert status == [ACCEPTED, REJECTED, REJECTED, ACCEPTED, REJECTED, REJECTED]
    assert [(r.index, r.code) for r in response.rejections] == [
        (1, INVALID.value[0]),
        (2, INVALID.value[0]),
        (4, INVALID.value[0]),
        (5, INVALID.value[0]),
    ]
    assert all(r.reason for r in response.rejections)
    assert await counts(client, topic) == (2, 0, 0, 0)
    assert await status_of(stub.GetMessage(pb.GetMessageRequest(topic=topic, id="negative"))) == (
        Code.NOT_FOUND
    )
    await assert_serves(broker.address)


async def test_absurd_expiry_times_are_rejected_per_message(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a batch of messages due in a minute, expiring in an hour, at a negative
    # time, and after year 9999
    topic = await create_topic(client, topic_name)
    at = now_ms() + 60_000
    expiries = [at + 3_600_000, -1, YEAR_10000_MS, 0]
    ids = ["in-an-hour", "negative", "year-10000", "never"]
    batch = encode_messages([at] * 4, [b""] * 4, ids, expires_at=expiries)
    # When it is produced
    response = await produce_raw(stub, topic, batch)
    # Then the absurd expiries are rejected as INVALID_ARGUMENT and the rest accepted
    status, _ = decode_results(response.results)
    assert status == [ACCEPTED, REJECTED, REJECTED, ACCEPTED]
    assert [(r.index, r.code) for r in response.rejections] == [
        (1, INVALID.value[0]),
        (2, INVALID.value[0]),
    ]
    assert await counts(client, topic) == (2, 0, 0, 0)
    await assert_serves(broker.address)


async def test_a_payload_over_the_topic_limit_is_rejected_per_message(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given a topic taking payloads of at most 100 bytes
    topic = await create_topic(client, topic_name, max_payload_bytes=100)
    at = now_ms() + 60_000
    payloads = [b"x" * 100, b"x" * 101, b"x" * (1 << 20), b""]
    # When payloads of 100, 101, 1 Mi and 0 bytes are produced
    batch = encode_messages([at] * 4, payloads, ["fits", "over", "way-over", "empty"])
    response = await produce_raw(stub, topic, batch)
    # Then only those over the limit are rejected
    status, _ = decode_results(response.results)
    assert status == [ACCEPTED, REJECTED, REJECTED, ACCEPTED]
    assert {r.index: r.code for r in response.rejections} == {
        1: INVALID.value[0],
        2: INVALID.value[0],
    }
    assert await counts(client, topic) == (2, 0, 0, 0)
    assert (await Admin(client).get(topic, "fits")).message.payload == b"x" * 100
    await assert_serves(broker.address)


async def test_an_over_long_or_nul_id_is_rejected_per_message(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str
) -> None:
    # Given ids of 256 bytes (the limit), 257 bytes, 258 bytes in 129 characters, and with a NUL
    topic = await create_topic(client, topic_name)
    ids = ["a" * 256, "b" * 257, "é" * 129, "nul\x00id"]
    at = now_ms() + 60_000
    # When they are produced
    response = await produce_raw(stub, topic, encode_messages([at] * 4, [b""] * 4, ids))
    # Then only the one within the limit is accepted
    status, _ = decode_results(response.results)
    assert status == [ACCEPTED, REJECTED, REJECTED, REJECTED]
    assert [r.index for r in response.rejections] == [1, 2, 3]
    assert {r.code for r in response.rejections} == {INVALID.value[0]}
    assert await counts(client, topic) == (1, 0, 0, 0)
    await assert_serves(broker.address)


# -- produce: malformed frames ------------------------------------------------


def _valid_frame() -> bytes:
    return encode_messages(
        [now_ms() + 60_000] * 3, [b"PAYLOAD-ONE", b"PAYLOAD-TWO", b"PAYLOAD-3"], ["a", "b", "c"]
    )


def _batch(
    timestamps: list[int],
    payload_offsets: list[int],
    payloads: bytes,
    id_offsets: list[int] | None = None,
    ids: bytes = b"",
    max_deliveries: list[int] | None = None,
) -> bytes:
    """A MessageBatch built field by field, consistent or not."""
    b = flatbuffers.Builder(256)
    ts = b.CreateNumpyVector(np.asarray(timestamps, dtype=np.int64))
    po = b.CreateNumpyVector(np.asarray(payload_offsets, dtype=np.uint32))
    pl = b.CreateByteVector(payloads)
    io = b.CreateNumpyVector(np.asarray(id_offsets, dtype=np.uint32)) if id_offsets else None
    ib = b.CreateByteVector(ids) if id_offsets else None
    md = (
        b.CreateNumpyVector(np.asarray(max_deliveries, dtype=np.uint32)) if max_deliveries else None
    )
    MessageBatch.Start(b)
    MessageBatch.AddTimestamps(b, ts)
    MessageBatch.AddPayloadOffsets(b, po)
    MessageBatch.AddPayloads(b, pl)
    if io is not None and ib is not None:
        MessageBatch.AddIdOffsets(b, io)
        MessageBatch.AddIds(b, ib)
    if md is not None:
        MessageBatch.AddMaxDeliveries(b, md)
    b.Finish(MessageBatch.End(b))
    return bytes(b.Output())


def _with_vector_length(frame: bytes, marker: bytes, length: int) -> bytes:
    """``frame`` with the length prefix of the vector holding ``marker`` overwritten."""
    at = frame.index(marker) - 4
    return frame[:at] + struct.pack("<I", length) + frame[at + 4 :]


def _malformed() -> dict[str, bytes]:
    at = now_ms() + 60_000
    valid = _valid_frame()
    rng = random.Random(20261121)
    frames = {f"random {n} bytes": rng.randbytes(n) for n in (1, 3, 16, 200, 4096)}
    frames |= {
        "truncated to half": valid[: len(valid) // 2],
        "truncated by 8 bytes": valid[:-8],
        "root offset out of range": struct.pack("<I", 0xFFFFFFF0) + valid[4:],
        "payload vector longer than the frame": _with_vector_length(
            valid, b"PAYLOAD-ONE", 0x7FFFFFFF
        ),
        "payload offset past the blob": _batch([at], [0, 1000], b"abc"),
        "payload offsets going back": _batch([at, at], [0, 3, 1], b"a"),
        "payload offsets for fewer messages": _batch([at, at], [0, 3], b"abc"),
        "id offset past the blob": _batch([at], [0, 1], b"a", [0, 50], b"id"),
        "id not UTF-8": _batch([at], [0, 1], b"a", [0, 2], b"\xff\xfe"),
        "max_deliveries for more messages": _batch([at], [0, 1], b"a", max_deliveries=[1, 2, 3]),
    }
    return frames


MALFORMED = _malformed()


@pytest.mark.parametrize("frame", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_a_malformed_frame_aborts_the_produce_stream(
    stub: Stub, client: Client, broker: BrokerProcess, topic_name: str, frame: bytes
) -> None:
    # Given a topic
    topic = await create_topic(client, topic_name)
    # When a malformed MessageBatch is produced to it
    # Then the stream is aborted with INVALID_ARGUMENT
    assert await status_of(produce_raw(stub, topic, frame)) == INVALID
    # and nothing was stored
    assert await counts(client, topic) == EMPTY
    await assert_serves(broker.address)
