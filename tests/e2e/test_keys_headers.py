"""A message's key and headers through a real broker process on memory: the
driver produces them, the consumer, get, scan, the dead list and the by-due
listing give them back; a bad key or bad headers refuse their message (and
only it) with a clear reason, and nothing of it is stored."""

from __future__ import annotations

import flatbuffers
import msgspec
import numpy as np
import pytest

from dejaq.core import headers as header_codec
from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import InsertStatus
from dejaq.core.wire.batches import decode_results
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from dejaq.fbs.batch import MessageBatch
from dejaq.proto import dejaq_pb2 as pb
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.raw_calls import ACCEPTED, INVALID, REJECTED, Stub, produce_raw
from tests.e2e.support import (
    consuming,
    counts,
    create_topic,
    dead_includes,
    now_ms,
    wait_until,
)

pytestmark = pytest.mark.timeout(60)

TRACE = {"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
TYPED = {"Content-Type": "application/json", "schema": "v2 (ünïcode)"}


async def test_key_and_headers_go_from_producer_to_consumer_get_and_scan(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    async with Client(memory_broker.address) as client:
        # given one message sent with a key and headers, one with a key only, one with neither
        topic = await create_topic(client, topic_name, buckets=1)
        due = now_ms()
        async with Producer(client, topic) as producer:
            first = await producer.send(b"a", at_ms=due, id="m1", key="tenant-é", headers=TYPED)
            rest = await producer.send_batch(
                [Outgoing(b"b", due, "m2", key="user-7"), Outgoing(b"c", due, "m3")]
            )
        assert [r.status for r in [first, *rest]] == [InsertStatus.ACCEPTED] * 3
        # when a consumer takes them, then each delivery has its own
        async with consuming(client, topic, credits=10) as inbox:
            got = {d.id: d for d in await inbox.take(3)}
            assert (got["m1"].key, got["m1"].headers) == ("tenant-é", TYPED)
            assert (got["m2"].key, got["m2"].headers) == ("user-7", {})
            assert (got["m3"].key, got["m3"].headers) == ("", {})
            for d in got.values():
                await d.nack(60_000, confirm=True)
        # and get and scan show them too
        admin = Admin(client)
        info = await admin.get(topic, "m1")
        assert (info.key, info.headers, info.message.key) == ("tenant-é", TYPED, "tenant-é")
        page = await admin.scan_bucket(topic, 0)
        assert {m.message.id: (m.key, m.headers) for m in page.messages} == {
            "m1": ("tenant-é", TYPED),
            "m2": ("user-7", {}),
            "m3": ("", {}),
        }


async def test_the_dead_list_and_the_by_due_listing_show_key_and_headers(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    async with Client(memory_broker.address) as client:
        # given a message delivered at most twice and one waiting an hour
        topic = await create_topic(client, topic_name, max_deliveries=2)
        async with Producer(client, topic) as producer:
            await producer.send(b"d", id="dies", key="k-dead", headers=TRACE)
            await producer.send(b"w", at_ms=now_ms() + 3_600_000, id="waits", key="k-w")
        # when the first is never acked, it is dead with its key and headers
        async with consuming(client, topic, lease_ms=300) as inbox:
            await inbox.take(2)
            await wait_until(dead_includes(client, topic, "dies"), 5, "dead-lettering")
        (dead,) = await Admin(client).list_dead(topic)
        assert (dead.message.id, dead.key, dead.headers) == ("dies", "k-dead", TRACE)
        # and the by-due listing shows the waiting one's
        listed = await client.call("ListByDue", pb.ListByDueRequest(topic=topic))
        shown = {m.id: (m.key, dict(m.headers)) for m in listed.messages}
        assert shown["waits"] == ("k-w", {})


def _frame(keys: list[bytes], heads: list[bytes]) -> bytes:
    """A MessageBatch built by the generated classes, as any client could send it."""
    n = len(keys)
    b = flatbuffers.Builder(1024)
    vectors = []
    for column in (keys, heads):
        offsets = np.cumsum([0, *map(len, column)], dtype=np.uint32)
        vectors.append((b.CreateNumpyVector(offsets), b.CreateByteVector(b"".join(column))))
    ids = [f"m{i}".encode() for i in range(n)]
    id_off = b.CreateNumpyVector(np.cumsum([0, *map(len, ids)], dtype=np.uint32))
    id_blob = b.CreateByteVector(b"".join(ids))
    ts = b.CreateNumpyVector(np.full(n, now_ms() + 60_000, dtype=np.int64))
    pay_off = b.CreateNumpyVector(np.zeros(n + 1, dtype=np.uint32))
    pay = b.CreateByteVector(b"")
    MessageBatch.Start(b)
    MessageBatch.AddTimestamps(b, ts)
    MessageBatch.AddIdOffsets(b, id_off)
    MessageBatch.AddIds(b, id_blob)
    MessageBatch.AddPayloadOffsets(b, pay_off)
    MessageBatch.AddPayloads(b, pay)
    MessageBatch.AddKeyOffsets(b, vectors[0][0])
    MessageBatch.AddKeys(b, vectors[0][1])
    MessageBatch.AddHeaderOffsets(b, vectors[1][0])
    MessageBatch.AddHeaders(b, vectors[1][1])
    b.Finish(MessageBatch.End(b))
    return bytes(b.Output())


def _raw_headers(headers: dict[str, str]) -> bytes:
    """Headers encoded without the bounds check, as a careless client would."""
    return msgspec.msgpack.encode(headers)


BAD = [
    (b"k" * 257, b"", "at most 256 bytes"),
    (b"\xff\xfeuser", b"", "must be UTF-8"),
    (b"tenant\n7", b"", "control characters"),
    (b"", _raw_headers({f"h{i}": "v" for i in range(65)}), "at most 64 headers"),
    (b"", _raw_headers({"big": "v" * 9 * 1024}), "at most 8192 bytes"),
    (b"", _raw_headers({"bad name": "v"}), "not an HTTP token"),
    (b"", b"\x93\x01\x02\x03", "not a map of strings"),
]


async def test_a_bad_key_or_bad_headers_refuse_that_message_and_store_nothing_of_it(
    memory_broker: BrokerProcess, stub: Stub, topic_name: str
) -> None:
    async with Client(memory_broker.address) as client:
        topic = await create_topic(client, topic_name)
        # given one frame: a good message first, then one of each bad key and headers
        keys = [b"fine", *(k for k, _, _ in BAD)]
        heads = [header_codec.encode(TRACE), *(h for _, h, _ in BAD)]
        # when it is produced
        response = await produce_raw(stub, topic, _frame(keys, heads))
        # then the good one is accepted and each bad one refused, saying why
        status, _ = decode_results(response.results)
        assert status == [ACCEPTED] + [REJECTED] * len(BAD)
        reasons = {r.index: r.reason for r in response.rejections}
        for i, (_, _, why) in enumerate(BAD, start=1):
            assert why in reasons[i], (i, reasons[i])
        assert {r.code for r in response.rejections} == {INVALID.value[0]}
        # and only the good one is stored, with its key and headers
        admin = Admin(client)
        good = await admin.get(topic, "m0")
        assert (good.key, good.headers) == ("fine", TRACE)
        for i in range(1, len(BAD) + 1):
            with pytest.raises(NotFound):
                await admin.get(topic, f"m{i}")
        assert await counts(client, topic) == (1, 0, 0, 0)


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"key": "k" * 257}, "at most 256 bytes"),
        ({"key": "a\x00b"}, "control characters"),
        ({"headers": {f"h{i}": "v" for i in range(65)}}, "at most 64 headers"),
        ({"headers": {"big": "v" * 9 * 1024}}, "at most 8192 bytes"),
        ({"headers": {"bad:name": "v"}}, "not an HTTP token"),
    ],
)
async def test_the_driver_refuses_a_bad_key_or_headers_before_sending(
    memory_broker: BrokerProcess, topic_name: str, options: dict[str, object], why: str
) -> None:
    async with Client(memory_broker.address) as client:
        topic = await create_topic(client, topic_name)
        async with Producer(client, topic) as producer:
            with pytest.raises(InvalidArgument, match=why):
                await producer.send(b"x", id="bad", **options)  # type: ignore[arg-type]
            with pytest.raises(InvalidArgument, match=why):
                await producer.send_batch([Outgoing(b"x", now_ms(), "bad", **options)])  # type: ignore[arg-type]
        with pytest.raises(NotFound):
            await Admin(client).get(topic, "bad")
