"""The driver's spans and metrics (``driver/tracing.py``), through an embedded
broker in the test's loop, recorded by the OpenTelemetry SDK's in-memory exporter."""

from __future__ import annotations

import asyncio

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
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


def _hex(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


async def test_the_consumer_s_span_continues_the_producer_s_trace(otel: Otel) -> None:
    async with embedded() as client:
        await Admin(client).create_topic("followed")
        # When a message with a key is produced and consumed
        async with Producer(client, "followed") as producer:
            await producer.send(b"x", id="k1", key="tenant-7")
        got = await take_one(client, "followed")
    (send,) = otel.spans("send followed")
    (process,) = otel.spans("process followed")
    trace_id, send_id = _hex(send)
    # Then the message carried the send span's context as its traceparent
    assert got.headers["traceparent"].startswith(f"00-{trace_id}-{send_id}-")
    # And the process span is its child, in its trace, and linked to it
    assert process.parent is not None and f"{process.parent.span_id:016x}" == send_id
    assert _hex(process)[0] == trace_id
    assert [f"{link.context.span_id:016x}" for link in process.links] == [send_id]
    assert send.attributes is not None and process.attributes is not None
    assert send.attributes["dejaq.key"] == process.attributes["dejaq.key"] == "tenant-7"


async def test_a_message_keeps_its_own_traceparent_and_the_current_tracestate(
    otel: Otel,
) -> None:
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with embedded() as client:
        await Admin(client).create_topic("stated")
        async with Producer(client, "stated") as producer:
            # Given one message with a traceparent of its own, and one without
            parent = trace.NonRecordingSpan(
                trace.SpanContext(
                    0x4BF92F3577B34DA6A3CE929D0E0E4736,
                    0x00F067AA0BA902B7,
                    True,
                    trace.TraceFlags(1),
                    trace.TraceState([("vendor", "x")]),
                )
            )
            # When both are sent under the application's span, whose state says vendor=x
            with trace.use_span(parent):
                await producer.send_batch(
                    [
                        Outgoing(b"a", 0, id="own", headers={"traceparent": own, "x-env": "t"}),
                        Outgoing(b"b", 0, id="new", headers={"x-env": "t"}),
                    ]
                )
        async with Consumer(client, "stated") as consumer:
            got = {d.id: d for d in await _take(consumer, 2)}
    # Then the first kept its own, and the second carries the send span's with the state
    assert got["own"].headers == {"traceparent": own, "x-env": "t"}
    (send,) = otel.spans("send stated")
    trace_id, send_id = _hex(send)
    assert trace_id == "4bf92f3577b34da6a3ce929d0e0e4736"  # the application's trace
    assert got["new"].headers == {
        "x-env": "t",
        "traceparent": got["new"].headers["traceparent"],
        "tracestate": "vendor=x",
    }
    assert got["new"].headers["traceparent"].startswith(f"00-{trace_id}-{send_id}-")


async def test_a_redelivery_is_a_new_process_span_linked_to_the_same_creation(
    otel: Otel,
) -> None:
    async with embedded() as client:
        await Admin(client).create_topic("again")
        async with Producer(client, "again") as producer:
            await producer.send(b"x", id="r1")
        # When the first delivery is nacked and the second acked
        async with Consumer(client, "again") as consumer:
            first = await consumer.receive(10)
            assert first is not None
            await first.nack(confirm=True)
            second = await consumer.receive(10)
            assert second is not None
            await second.ack(confirm=True)
    # Then there are two process spans, attempts 1 and 2, both linked to the send span
    assert (first.deliveries, second.deliveries) == (1, 2)
    (send,) = otel.spans("send again")
    spans = otel.spans("process again")
    assert [s.attributes["dejaq.delivery"] for s in spans if s.attributes] == [1, 2]
    assert [s.attributes["dejaq.settled"] for s in spans if s.attributes] == ["nack", "ack"]
    send_id = _hex(send)[1]
    for span in spans:
        assert [f"{link.context.span_id:016x}" for link in span.links] == [send_id]
        assert _hex(span)[0] == _hex(send)[0]


async def test_without_a_provider_messages_carry_no_trace_headers() -> None:
    async with embedded() as client:
        await Admin(client).create_topic("bare")
        async with Producer(client, "bare") as producer:
            await producer.send(b"x", id="b1", headers={"x-env": "t"})
            await producer.send(b"y", id="b2")
        async with Consumer(client, "bare") as consumer:
            got = {d.id: d for d in await _take(consumer, 2)}
    assert got["b1"].headers == {"x-env": "t"}
    assert got["b2"].headers == {} and got["b2"]._raw_headers == b""


async def _take(consumer: Consumer, n: int) -> list[Delivery]:
    out = []
    async for d in consumer:
        await d.ack(confirm=True)
        out.append(d)
        if len(out) == n:
            break
    return out


async def test_a_delivery_still_in_another_task_s_hands_ends_its_span_with_the_consumer(
    otel: Otel,
) -> None:
    async with embedded() as client:
        await Admin(client).create_topic("left")
        async with Producer(client, "left") as producer:
            await producer.send(b"x", id="l1")
        consumer = await Consumer(client, "left", close_timeout_s=0.1).start()
        taken = asyncio.Event()

        async def hold_it() -> None:
            await consumer.receive(10)
            taken.set()
            await asyncio.Event().wait()  # processing for good

        holder = asyncio.create_task(hold_it())
        await asyncio.wait_for(taken.wait(), 10)
        # When the consumer closes while another task still holds the delivery
        await consumer.close()
        holder.cancel()
    # Then its process span ended, saying so
    (process,) = otel.spans("process left")
    assert process.attributes is not None and process.attributes["dejaq.settled"] == "closed"


async def test_a_process_span_ends_when_its_task_takes_the_next_delivery(otel: Otel) -> None:
    async with embedded() as client:
        await Admin(client).create_topic("onwards")
        async with Producer(client, "onwards") as producer:
            await producer.send_batch([Outgoing(b"x", 0, id=f"n{i}") for i in range(2)])
        async with Consumer(client, "onwards") as consumer:
            # When a task takes a delivery, then the next before settling the first
            first = await consumer.receive(10)
            second = await consumer.receive(10)
            assert first is not None and second is not None
            # Then the first's span has ended, saying so; the second's is still open
            (ended,) = otel.spans("process onwards")
            assert ended.attributes is not None
            assert ended.attributes["messaging.message.id"] == first.id
            assert ended.attributes["dejaq.settled"] == "next"
            await first.ack()
            await second.ack(confirm=True)
    # And acking the first later leaves its span as it was
    assert [
        s.attributes["dejaq.settled"] for s in otel.spans("process onwards") if s.attributes
    ] == [
        "next",
        "ack",
    ]
