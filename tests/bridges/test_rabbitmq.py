"""The RabbitMQ ends of a bridge against a real ``rabbitmq-server``: a queue
consumed, acknowledged and consumed again after a reopen; publishes confirmed
by the server; a killed node seen as ``EndpointDown`` and resumed from once it
is back on the same port and database."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import aio_pika
import aio_pika.abc
import pytest

from dejaq.bridges.endpoints import EndpointDown, Outbound
from dejaq.bridges.rabbitmq import DIGEST_PREFIX, RabbitMQSink, RabbitMQSource, source_id
from dejaq.core.errors import InvalidArgument
from tests.bridges.ends import read_again_after_a_reopen, read_all, through_a_kill, until
from tests.rabbitmq_server import RabbitMQServer


@pytest.fixture
async def channel(rabbitmq_server: RabbitMQServer) -> AsyncIterator[aio_pika.abc.AbstractChannel]:
    connection = await aio_pika.connect(rabbitmq_server.url)
    yield await connection.channel()
    await connection.close()


async def new_queue(channel: aio_pika.abc.AbstractChannel) -> aio_pika.abc.AbstractQueue:
    """A durable queue of the test's own."""
    return await channel.declare_queue(f"q{uuid.uuid4().hex[:12]}", durable=True)


async def test_a_source_reads_headers_and_properties_as_fields_and_message_id_as_id(
    rabbitmq_server: RabbitMQServer, channel: aio_pika.abc.AbstractChannel
) -> None:
    # given a queue holding a message with headers and properties
    queue = await new_queue(channel)
    headers = {"due_ms": 1234, "key": "k1", "flag": True}
    sent = aio_pika.Message(
        b"one", message_id="m-1", headers=headers, content_type="text/plain", type="kind"
    )
    await channel.default_exchange.publish(sent, queue.name)
    source = RabbitMQSource.from_options(rabbitmq_server.url, {"queue": queue.name})
    await source.open()
    # when it reads it
    (one,) = await read_all(source, 1)
    # then it carries its message_id, headers and properties as text
    assert (one.payload, one.source_id) == (b"one", "m-1")
    assert (one.fields["due_ms"], one.fields["key"], one.fields["flag"]) == ("1234", "k1", "True")
    assert (one.fields["content_type"], one.fields["type"]) == ("text/plain", "kind")
    # and once acknowledged, a reopened source has nothing more
    await source.ack([one])
    await source.close()
    await source.open()
    assert await source.read(10, 300) == []
    assert await source.lag() == 0
    await source.close()


async def test_a_message_read_and_never_acknowledged_comes_again_after_a_reopen(
    rabbitmq_server: RabbitMQServer, channel: aio_pika.abc.AbstractChannel
) -> None:
    # given a queue of two messages and a source of it
    queue = await new_queue(channel)
    for body in (b"acked", b"forgotten"):
        await channel.default_exchange.publish(aio_pika.Message(body), queue.name)
    source = RabbitMQSource.from_options(rabbitmq_server.url, {"queue": queue.name})
    # when it reads both and acks the first, then after a reopen the second comes again
    await read_again_after_a_reopen(source)


async def test_a_read_lingers_for_a_full_batch_of_what_the_queue_holds(
    rabbitmq_server: RabbitMQServer, channel: aio_pika.abc.AbstractChannel
) -> None:
    # given a queue of 300 messages, and a source lingering long for a full batch
    queue = await new_queue(channel)
    for n in range(300):
        await channel.default_exchange.publish(aio_pika.Message(b"%d" % n), queue.name)
    options = {"queue": queue.name, "linger_ms": 600}
    source = RabbitMQSource.from_options(rabbitmq_server.url, options)
    await source.open()
    # when it reads batches of 200, then the first is full, the second what is left
    first = await source.read(200, 5000)
    second = await source.read(200, 5000)
    assert [m.payload for m in [*first, *second]] == [b"%d" % n for n in range(300)]
    assert (len(first), len(second)) == (200, 100)
    await source.close()


async def test_a_batch_handed_over_before_an_earlier_one_is_acknowledged_with_it(
    rabbitmq_server: RabbitMQServer, channel: aio_pika.abc.AbstractChannel
) -> None:
    # given a source that read two batches of a queue
    queue = await new_queue(channel)
    for body in (b"a", b"b", b"c", b"d"):
        await channel.default_exchange.publish(aio_pika.Message(body), queue.name)
    source = RabbitMQSource.from_options(rabbitmq_server.url, {"queue": queue.name})
    await source.open()
    read = await read_all(source, 4)
    # when the later batch is acknowledged first, and the source restarts
    await source.ack(read[2:])
    await source.close()
    await source.open()
    # then all four come again: one ack with multiple covers a prefix of deliveries
    again = await read_all(source, 4)
    assert [m.payload for m in again] == [b"a", b"b", b"c", b"d"]
    # and once the earlier batch is acknowledged too, none is left
    await source.ack(again[2:])
    await source.ack(again[:2])
    await source.close()
    await source.open()
    assert await source.read(10, 300) == []
    await source.close()


async def test_lag_is_the_messages_waiting_in_the_queue(
    rabbitmq_server: RabbitMQServer, channel: aio_pika.abc.AbstractChannel
) -> None:
    queue = await new_queue(channel)
    for n in range(5):
        await channel.default_exchange.publish(aio_pika.Message(b"%d" % n), queue.name)
    # a prefetch of 2: three stay in the queue, ready
    source = RabbitMQSource.from_options(rabbitmq_server.url, {"queue": queue.name, "prefetch": 2})
    await source.open()
    await until(source.lag, lambda lag: lag == 3)
    await source.close()


async def test_a_sink_returns_once_confirmed_persistent_with_the_dejaq_id(
    rabbitmq_server: RabbitMQServer, channel: aio_pika.abc.AbstractChannel
) -> None:
    # given an exchange bound to a queue
    queue = await new_queue(channel)
    exchange = await channel.declare_exchange(f"x{uuid.uuid4().hex[:8]}", durable=True)
    await queue.bind(exchange, routing_key="due")
    options = {"exchange": exchange.name, "routing_key": "due"}
    sink = RabbitMQSink.from_options(rabbitmq_server.url, options)
    await sink.open()
    # when it publishes a batch
    await sink.publish(
        [Outbound(f"m{n}".encode(), {"id": f"id-{n}", "due_ms": str(n)}) for n in range(100)]
    )
    # then the queue holds them all, in order, persistent, with their ids and fields
    assert (
        await channel.declare_queue(queue.name, passive=True)
    ).declaration_result.message_count == 100
    first = await queue.get()
    assert first is not None
    assert (first.body, first.message_id) == (b"m0", "id-0")
    assert first.delivery_mode == aio_pika.DeliveryMode.PERSISTENT
    assert first.headers == {"id": "id-0", "due_ms": "0"}
    await sink.close()


async def test_a_message_no_queue_takes_is_not_counted_as_published(
    rabbitmq_server: RabbitMQServer, channel: aio_pika.abc.AbstractChannel
) -> None:
    exchange = await channel.declare_exchange(f"x{uuid.uuid4().hex[:8]}")
    sink = RabbitMQSink.from_options(
        rabbitmq_server.url, {"exchange": exchange.name, "routing_key": "nobody"}
    )
    await sink.open()
    with pytest.raises(EndpointDown, match="unroutable"):
        await sink.publish([Outbound(b"lost?", {"id": "1"})])
    await sink.close()


async def test_a_missing_queue_or_exchange_is_down_with_the_reason(
    rabbitmq_server: RabbitMQServer,
) -> None:
    source = RabbitMQSource.from_options(rabbitmq_server.url, {"queue": "absent-queue"})
    with pytest.raises(EndpointDown, match=r"'absent-queue'.*NOT_FOUND"):
        await source.open()
    sink = RabbitMQSink.from_options(
        rabbitmq_server.url, {"exchange": "absent-exchange", "routing_key": "k"}
    )
    with pytest.raises(EndpointDown, match=r"'absent-exchange'.*NOT_FOUND"):
        await sink.open()


def test_a_message_without_message_id_takes_a_digest_of_body_and_headers() -> None:
    # (aio-pika gives every message it publishes a message_id; other clients may not)
    digest = source_id(b"two", None, {"due_ms": "5"})
    assert digest.startswith(DIGEST_PREFIX) and len(digest) == len(DIGEST_PREFIX) + 32
    assert source_id(b"two", None, {"due_ms": "5"}) == digest  # a redelivery: the same id
    assert source_id(b"two", None, {"due_ms": "6"}) != digest
    assert source_id(b"twO", None, {"due_ms": "5"}) != digest
    assert source_id(b"two", "", {"due_ms": "5"}) == digest


def test_bad_options_are_refused_by_name() -> None:
    with pytest.raises(InvalidArgument, match="option 'queue' is required"):
        RabbitMQSource.from_options("amqp://127.0.0.1/", {})
    with pytest.raises(InvalidArgument, match="option 'prefetch' must be a whole number"):
        RabbitMQSource.from_options("amqp://127.0.0.1/", {"queue": "q", "prefetch": 0})
    with pytest.raises(InvalidArgument, match="'linger_ms' must be a whole number from 0 to 1000"):
        RabbitMQSource.from_options("amqp://127.0.0.1/", {"queue": "q", "linger_ms": -1})
    assert RabbitMQSource.from_options("amqp://h/", {"queue": "q", "linger_ms": 0}).linger_ms == 0
    with pytest.raises(InvalidArgument, match="not an AMQP URL"):
        RabbitMQSink.from_options("nats://127.0.0.1/", {"routing_key": "k"})


async def test_both_ends_see_a_killed_node_and_resume_once_it_is_back(
    rabbitmq_server: RabbitMQServer,
) -> None:
    # given a durable queue holding a persistent message, a source of it and a sink
    connection = await aio_pika.connect(rabbitmq_server.url)
    channel = await connection.channel()
    queue = await new_queue(channel)
    await channel.default_exchange.publish(
        aio_pika.Message(b"before", message_id="b", delivery_mode=aio_pika.DeliveryMode.PERSISTENT),
        queue.name,
    )
    await connection.close()
    source = RabbitMQSource.from_options(rabbitmq_server.url, {"queue": queue.name})
    sink = RabbitMQSink.from_options(rabbitmq_server.url, {"routing_key": queue.name})
    # when the node is killed and started again on the same port and database
    before, again = await through_a_kill(rabbitmq_server, source, sink)
    # then the unacknowledged message came again, and what the sink published after
    assert (again.payload, again.source_id) == (b"before", before.source_id)
    (after,) = await read_all(source, 1)
    assert after.source_id == "after"
    await source.ack([after])
    await source.close()
    await sink.close()
