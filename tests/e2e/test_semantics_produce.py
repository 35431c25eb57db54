"""Producing against a real broker, once per storage backend: idempotent
produce by id, generated ids, move and cancel with versions."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from dejaq.core.errors import Leased, NotFound, StaleVersion
from dejaq.core.model import InsertStatus
from dejaq.core.wire.batches import decode_results, encode_messages
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from dejaq.proto import dejaq_pb2 as pb
from tests.e2e.support import (
    consuming,
    counts,
    create_topic,
    now_ms,
    produce_one,
)

SHORT_LEASE_MS = 300


# -- producer mutations by id -------------------------------------------------


async def test_move_a_waiting_message_with_its_version(client: Client, topic_name: str) -> None:
    # Given a message waiting for a minute
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms() + 60_000)
    admin = Admin(client)
    before = (await admin.get(topic, mid)).message
    assert before.version == 1
    # When a move quotes a version that is not current
    with pytest.raises(StaleVersion):
        await admin.move(topic, mid, before.version + 1, now_ms() + 100)
    # Then nothing changed
    unchanged = (await admin.get(topic, mid)).message
    assert (unchanged.timestamp, unchanged.version) == (before.timestamp, before.version)
    # When the move quotes the current version
    target = now_ms() + 300
    moved = await admin.move(topic, mid, before.version, target)
    assert (moved.id, moved.timestamp_ms) == (mid, target)
    assert moved.version > before.version
    # Then the old version is stale
    with pytest.raises(StaleVersion):
        await admin.move(topic, mid, before.version, now_ms())
    # and the message is delivered at its new time
    async with consuming(client, topic) as inbox:
        d = await inbox.next(timeout_s=5)
        assert (d.id, d.timestamp_ms) == (mid, target)
        assert d.received_at_ms >= target
        await d.ack(confirm=True)


async def test_cancel_a_waiting_message_with_its_version(client: Client, topic_name: str) -> None:
    # Given a message due in 500 ms
    topic = await create_topic(client, topic_name)
    due = now_ms() + 500
    mid = await produce_one(client, topic, due)
    admin = Admin(client)
    version = (await admin.get(topic, mid)).message.version
    # When a cancel quotes a stale version
    with pytest.raises(StaleVersion):
        await admin.cancel(topic, mid, version + 1)
    # Then the message is still there
    assert (await admin.get(topic, mid)).message.version == version
    # When the cancel quotes the current version
    result = await admin.cancel(topic, mid, version)
    # Then it is deleted and never delivered
    assert result.version == 0
    with pytest.raises(NotFound):
        await admin.get(topic, mid)
    async with consuming(client, topic) as inbox:
        await inbox.quiet_for(max(0.0, (due - now_ms()) / 1000) + 0.5)


async def test_a_leased_message_cannot_be_moved_or_cancelled(
    client: Client, topic_name: str
) -> None:
    # Given a message leased by a consumer
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    admin = Admin(client)
    async with consuming(client, topic, lease_ms=60_000) as inbox:
        d = await inbox.next()
        held = (await admin.get(topic, mid)).message
        # When the producer tries to move or cancel it
        with pytest.raises(Leased):
            await admin.move(topic, mid, held.version, now_ms() + 60_000)
        with pytest.raises(Leased):
            await admin.cancel(topic, mid, held.version)
        # Then nothing changed and the holder can still ack it
        after = await admin.get(topic, mid)
        assert after.state == "leased"
        assert after.message.lease_owner == inbox.consumer.consumer_id
        assert (after.message.version, after.message.timestamp) == (held.version, held.timestamp)
        await d.ack(confirm=True)


# -- produce ------------------------------------------------------------------


async def test_produce_is_idempotent_by_id(client: Client, topic_name: str) -> None:
    # Given a message produced with id "order-42"
    topic = await create_topic(client, topic_name)
    at = now_ms() + 60_000
    admin = Admin(client)
    async with Producer(client, topic) as producer:
        (first,) = await producer.send_batch([Outgoing(b"first", at, id="order-42")])
        # When the same id is produced again, alone and twice within one batch
        (second,) = await producer.send_batch([Outgoing(b"second", at + 1, id="order-42")])
        third, fourth = await producer.send_batch(
            [Outgoing(b"a", at, id="order-43"), Outgoing(b"b", at + 1, id="order-43")]
        )
    # Then the repeats are DUPLICATE and the first message is untouched
    assert (first.status, second.status) == (InsertStatus.ACCEPTED, InsertStatus.DUPLICATE)
    assert (third.status, fourth.status) == (InsertStatus.ACCEPTED, InsertStatus.DUPLICATE)
    m = (await admin.get(topic, "order-42")).message
    assert (m.payload, m.timestamp, m.version) == (b"first", at, 1)
    assert (await admin.get(topic, "order-43")).message.payload == b"a"
    assert await counts(client, topic) == (2, 0, 0, 0)


async def test_ids_are_generated_when_empty(client: Client, topic_name: str) -> None:
    # Given messages without ids, from the driver and from a raw frame
    topic = await create_topic(client, topic_name)
    at = now_ms() + 60_000
    async with Producer(client, topic) as producer:
        driver_results = await asyncio.gather(
            producer.send(b"a", at_ms=at), producer.send(b"b", at_ms=at)
        )
    assert [r.status for r in driver_results] == [InsertStatus.ACCEPTED] * 2
    call = client.stub().Produce()
    await call.write(
        pb.ProduceRequest(topic=topic, batch=encode_messages([at, at], [b"c", b"d"], ids=None))
    )
    response = await call.read()
    await call.done_writing()
    assert await call.read() is grpc.aio.EOF
    raw_status, raw_ids = decode_results(response.results)
    # Then every message got a distinct id under which it can be read
    assert raw_status == [InsertStatus.ACCEPTED] * 2
    ids = [r.id for r in driver_results] + raw_ids
    assert all(ids) and len(set(ids)) == 4
    admin = Admin(client)
    payloads = [(await admin.get(topic, i)).message.payload for i in ids]
    assert payloads == [b"a", b"b", b"c", b"d"]
