"""The driver's spans and metrics (``driver/tracing.py``), through an embedded
broker in the test's loop, recorded by the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import pytest
from opentelemetry.trace import SpanKind

from dejaq.driver import Admin, Client, Consumer, Delivery, Producer, embedded, tracing
from dejaq.driver.producer import Outgoing
from tests.otel import Otel

pytestmark = pytest.mark.timeout(60)


async def take_one(client: Client, topic: str, *, nack: bool = False) -> Delivery:
    """One delivery of ``topic``, acked (or nacked) and confirmed."""
    async with Consumer(client, topic) as consumer:
        async for delivery in consumer:
            if nack:
                await delivery.nack(confirm=True)
            else:
                await delivery.ack(confirm=True)
            return delivery
    raise AssertionError("the consumer ended without a delivery")


async def test_without_a_provider_nothing_is_traced() -> None:
    # Given no tracer or meter provider set (the API's no-op)
    assert tracing.tracer() is None and tracing.meter() is None
    async with embedded() as client:
        await Admin(client).create_topic("quiet")
        # When a message goes through
        async with Producer(client, "quiet") as producer:
            await producer.send(b"x", id="q1")
        got = await take_one(client, "quiet")
    # Then the delivery carried no span and no trace context
    assert got._process is None and got.trace_context is None


async def test_send_process_and_settle_spans_carry_the_conventions(otel: Otel) -> None:
    async with embedded() as client:
        await Admin(client).create_topic("orders")
        host, port = client.address.rsplit(":", 1)
        # When one message is produced and consumed
        async with Producer(client, "orders") as producer:
            await producer.send(b"x", id="o1")
        got = await take_one(client, "orders")
    # Then the producer's send span is a PRODUCER span of the message
    (send,) = otel.spans("send orders")
    assert send.kind == SpanKind.PRODUCER
    assert send.attributes is not None
    assert dict(send.attributes) | {"dejaq.due_ms": 0} == {
        "messaging.system": "dejaq",
        "messaging.destination.name": "orders",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.message.id": "o1",
        "server.address": host,
        "server.port": int(port),
        "dejaq.due_ms": 0,
    }
    # And the consumer's process span is a CONSUMER span with the delivery's facts
    (process,) = otel.spans("process orders")
    assert process.kind == SpanKind.CONSUMER and process.attributes is not None
    attrs = dict(process.attributes)
    assert attrs["messaging.operation.type"] == "process"
    assert attrs["messaging.message.id"] == "o1" and attrs["dejaq.delivery"] == 1
    assert attrs["dejaq.due_ms"] == got.timestamp_ms and attrs["dejaq.lateness_ms"] >= 0
    assert attrs["dejaq.settled"] == "ack"
    # And the ack left in a settle span, a CLIENT span linked to the process span
    (settle,) = otel.spans("settle orders")
    assert settle.kind == SpanKind.CLIENT and settle.attributes is not None
    assert settle.attributes["messaging.operation.name"] == "ack"
    assert settle.attributes["messaging.batch.message_count"] == 1
    assert process.context is not None
    assert [link.context.span_id for link in settle.links] == [process.context.span_id]


async def test_metrics_count_sent_and_consumed_messages(otel: Otel) -> None:
    async with embedded() as client:
        await Admin(client).create_topic("counted")
        # When three messages are sent in one batch and one is consumed
        async with Producer(client, "counted") as producer:
            await producer.send_batch([Outgoing(b"x", 0, id=f"c{i}") for i in range(3)])
        await take_one(client, "counted")
    # Then the send span names the batch, and the counters and histograms have them
    (send,) = otel.spans("send counted")
    assert send.attributes is not None
    assert send.attributes["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in send.attributes
    assert sum(p.value for p in otel.points("messaging.client.sent.messages")) == 3
    assert sum(p.value for p in otel.points("messaging.client.consumed.messages")) >= 1
    assert sum(p.count for p in otel.points("messaging.process.duration")) >= 1
    assert sum(p.count for p in otel.points("dejaq.lateness")) >= 1


async def test_a_handler_that_raises_marks_its_process_span(otel: Otel) -> None:
    async with embedded() as client:
        await Admin(client).create_topic("failing")
        async with Producer(client, "failing") as producer:
            await producer.send(b"x", id="f1")
        consumer = await Consumer(client, "failing").start()

        async def handler(d: Delivery) -> None:
            await consumer.close()
            raise ValueError("bad input")

        # When the handler raises
        await consumer.run(handler)
    # Then its process span says why, and that the delivery was nacked
    (process, *_) = otel.spans("process failing")
    assert process.attributes is not None
    assert process.attributes["error.type"] == "ValueError"
    assert process.attributes["dejaq.settled"] == "nack"
