"""A batch published on an aiormq channel in one write, its confirms awaited
together, against a real ``rabbitmq-server``: each message's outcome, in
order, bodies larger than a frame whole, and the channel's confirm
bookkeeping left as aiormq keeps it, so that later publishes on it are
confirmed as themselves."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import aiormq
import aiormq.abc
import aiormq.exceptions
import pytest

from dejaq.bridges import amqp_batch
from tests.bridges.ends import until
from tests.rabbitmq_server import RabbitMQServer


@pytest.fixture
async def connection(
    rabbitmq_server: RabbitMQServer,
) -> AsyncIterator[aiormq.abc.AbstractConnection]:
    connection = await aiormq.connect(rabbitmq_server.url)
    yield connection
    await connection.close()


async def new_queue(channel: aiormq.abc.AbstractChannel) -> str:
    declared = await channel.queue_declare(f"q{uuid.uuid4().hex[:12]}", durable=True)
    assert declared.queue is not None
    return declared.queue


def batch(count: int, body: bytes = b"") -> list[amqp_batch.Message]:
    return [
        (body or f"m{n}".encode(), amqp_batch.properties({"n": str(n)}, f"id-{n}", persistent=True))
        for n in range(count)
    ]


async def bodies(channel: aiormq.abc.AbstractChannel, queue: str, count: int) -> list[bytes]:
    got = []
    for _ in range(count):
        message = await channel.basic_get(queue, no_ack=True)
        got.append(message.body)
    return got


async def confirming(connection: aiormq.abc.AbstractConnection) -> aiormq.abc.AbstractChannel:
    """A channel in confirm mode, as the RabbitMQ sink opens it."""
    channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
    amqp_batch.confirm_in_order(channel)
    return channel


async def test_a_confirmed_batch_reaches_the_queue_in_order_and_the_channel_goes_on(
    connection: aiormq.abc.AbstractConnection,
) -> None:
    # given a channel in confirm mode and a queue
    channel = await confirming(connection)
    queue = await new_queue(channel)
    # when two batches are published on it, one after the other
    first = await amqp_batch.publish(channel, "", queue, batch(300), mandatory=True)
    second = await amqp_batch.publish(channel, "", queue, batch(5), mandatory=True)
    # then every message is confirmed, the queue holds them in order
    assert first == [None] * 300 and second == [None] * 5
    assert await bodies(channel, queue, 305) == [f"m{n}".encode() for n in [*range(300), *range(5)]]
    # and no message id is left waiting for a return that will not come
    assert isinstance(channel, aiormq.Channel) and channel.message_id_delivery_tag == {}


async def test_an_unroutable_batch_is_returned_message_by_message_and_the_next_confirmed(
    connection: aiormq.abc.AbstractConnection,
) -> None:
    # given a channel in confirm mode and an exchange no queue is bound to
    channel = await confirming(connection)
    exchange = f"x{uuid.uuid4().hex[:8]}"
    await channel.exchange_declare(exchange, exchange_type="direct")
    queue = await new_queue(channel)
    # when a batch is published mandatory to it
    outcomes = await amqp_batch.publish(channel, exchange, "nobody", batch(3), mandatory=True)
    # then each message comes back returned, as aiormq says it
    assert [type(outcome) for outcome in outcomes] == [aiormq.exceptions.PublishError] * 3
    # and the channel's delivery tags still match the server's: batches after,
    # sent before the first is confirmed, are each confirmed
    answers = [
        await amqp_batch.send(channel, "", queue, batch(count), mandatory=True)
        for count in (2, 1000, 1000)
    ]
    assert [amqp_batch.outcomes(await a) for a in answers] == [[None] * n for n in (2, 1000, 1000)]
    assert await bodies(channel, queue, 2) == [b"m0", b"m1"]
    assert isinstance(channel, aiormq.Channel) and len(channel.confirmations) == 0


async def test_a_body_larger_than_a_frame_arrives_whole(
    connection: aiormq.abc.AbstractConnection,
) -> None:
    # given a body three frames long (the server's frame_max is 128 KiB)
    channel = await confirming(connection)
    queue = await new_queue(channel)
    body = bytes(range(256)) * 1500
    # when it is published in a batch with a small one
    sent = [*batch(1, body), *batch(1)]
    assert await amqp_batch.publish(channel, "", queue, sent) == [None, None]
    # then both arrive as they were
    assert await bodies(channel, queue, 2) == [body, b"m0"]


async def test_without_confirms_a_batch_returns_once_written(
    connection: aiormq.abc.AbstractConnection,
) -> None:
    channel = await connection.channel(publisher_confirms=False)
    queue = await new_queue(channel)
    assert await amqp_batch.publish(channel, "", queue, batch(50)) == [None] * 50
    # the server takes them in its time
    await until(
        lambda: channel.queue_declare(queue, passive=True),
        lambda declared: declared.message_count == 50,
    )
    assert await bodies(channel, queue, 50) == [f"m{n}".encode() for n in range(50)]
