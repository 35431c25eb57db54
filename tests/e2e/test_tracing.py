"""Tracing end to end: a ``dejaq broker --trace-sample 1`` process exports its
spans by the SDK's OTLP/HTTP exporter to a receiver in the test, the test's
producer and consumer record theirs with the SDK's in-memory exporter, and a
webhook receiver gets the ``traceparent`` of the broker's request span."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan
from opentelemetry.sdk.trace import ReadableSpan

from dejaq.core.model import TopicSettings, Webhook
from dejaq.driver import Admin, Client, Consumer, Producer
from tests.e2e.broker_process import BrokerProcess, StartBroker
from tests.e2e.conftest import empty_served_store
from tests.e2e.otlp_receiver import OtlpReceiver
from tests.e2e.support import wait_until
from tests.e2e.webhook_sink import Sink
from tests.otel import Otel

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
async def receiver() -> AsyncIterator[OtlpReceiver]:
    r = await OtlpReceiver().start()
    try:
        yield r
    finally:
        await r.stop()


@pytest.fixture
def traced_broker(start_broker: StartBroker, receiver: OtlpReceiver) -> BrokerProcess:
    """A broker on memory tracing everything, exporting to ``receiver`` soon."""
    return start_broker(
        "memory://",
        DEJAQ_TRACE_SAMPLE="1",
        DEJAQ_WEBHOOK_ALLOW="127.0.0.1",
        OTEL_EXPORTER_OTLP_ENDPOINT=receiver.endpoint,
        OTEL_BSP_SCHEDULE_DELAY="50",
        OTEL_SERVICE_NAME="broker-under-test",
    )


async def test_the_broker_exports_its_produce_and_lease_spans_by_otlp(
    traced_broker: BrokerProcess, receiver: OtlpReceiver, otel: Otel
) -> None:
    async with Client(traced_broker.address) as client:
        await Admin(client).create_topic("traced")
        # When a message is produced and consumed through the broker
        async with Producer(client, "traced") as producer:
            await producer.send(b"x", id="t1")
        async with Consumer(client, "traced") as consumer:
            async for delivery in consumer:
                await delivery.ack(confirm=True)
                break
    # Then the broker's OTLP exporter sent its produce span and a lease span
    await wait_until(lambda: receiver.named("produce traced"), 15, "the produce span")
    await wait_until(
        lambda: any(
            s.attributes.get("messaging.batch.message_count") == 1
            for s in receiver.named("lease traced")
        ),
        15,
        "a lease span that leased the message",
    )
    (produce,) = receiver.named("produce traced")
    assert produce.service == "broker-under-test"
    assert produce.kind == ProtoSpan.SPAN_KIND_SERVER
    assert produce.attributes["messaging.system"] == "dejaq"
    assert produce.attributes["messaging.destination.name"] == "traced"
    assert produce.attributes["messaging.operation.name"] == "produce"


def _ids(span: ReadableSpan) -> tuple[str, str]:
    assert span.context is not None
    return f"{span.context.trace_id:032x}", f"{span.context.span_id:016x}"


async def test_one_message_is_one_trace_from_producer_through_the_broker_to_consumer(
    traced_broker: BrokerProcess, receiver: OtlpReceiver, otel: Otel
) -> None:
    async with Client(traced_broker.address) as client:
        await Admin(client).create_topic("followed")
        # When one message is produced and consumed through a broker process
        async with Producer(client, "followed") as producer:
            await producer.send(b"x", id="f1")
        async with Consumer(client, "followed") as consumer:
            async for delivery in consumer:
                await delivery.ack(confirm=True)
                break
    # Then the producer's span and the consumer's carry the same trace id
    (send,) = otel.spans("send followed")
    (process,) = otel.spans("process followed")
    trace_id, send_id = _ids(send)
    assert _ids(process)[0] == trace_id
    assert process.parent is not None and f"{process.parent.span_id:016x}" == send_id
    # And the broker's produce span, exported by OTLP, is in that trace, under the send
    await wait_until(lambda: receiver.named("produce followed"), 15, "the produce span")
    (produce,) = receiver.named("produce followed")
    assert (produce.trace_id, produce.parent_span_id) == (trace_id, send_id)
    # And a lease span links to the message's creation context
    await wait_until(
        lambda: any((trace_id, send_id) in s.links for s in receiver.named("lease followed")),
        15,
        "a lease span linked to the message",
    )


async def test_a_webhook_receiver_gets_the_traceparent_of_the_broker_s_request_span(
    traced_broker: BrokerProcess, receiver: OtlpReceiver, sink: Sink
) -> None:
    async with Client(traced_broker.address) as client:
        await Admin(client).create_topic("hooked", TopicSettings(webhook=Webhook(sink.url)))
        # When a message of a webhook topic is due
        async with Producer(client, "hooked") as producer:
            await producer.send(b"x", id="w1")
        await wait_until(lambda: sink.ok_ids(), 15, "the webhook request")
    # Then its request carried a traceparent
    traceparent = sink.hits[0].headers["traceparent"]
    _, trace_id, span_id, _ = traceparent.split("-")
    # And it is the context of the broker's CLIENT span of that request
    await wait_until(lambda: receiver.named("send hooked"), 15, "the webhook span")
    (span,) = receiver.named("send hooked")
    assert span.kind == ProtoSpan.SPAN_KIND_CLIENT
    assert (span.trace_id, span.span_id) == (trace_id, span_id)
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["messaging.message.id"] == "w1"


async def test_a_webhook_request_continues_the_producer_s_trace(
    traced_broker: BrokerProcess, receiver: OtlpReceiver, sink: Sink, otel: Otel
) -> None:
    async with Client(traced_broker.address) as client:
        await Admin(client).create_topic("hooked-traced", TopicSettings(webhook=Webhook(sink.url)))
        # When a traced producer sends a message of a webhook topic
        async with Producer(client, "hooked-traced") as producer:
            await producer.send(b"x", id="w2")
        await wait_until(lambda: sink.ok_ids(), 15, "the webhook request")
    # Then the request's traceparent is in the producer's trace, under the broker's span
    (send,) = otel.spans("send hooked-traced")
    _, trace_id, span_id, _ = sink.hits[0].headers["traceparent"].split("-")
    assert trace_id == _ids(send)[0]
    await wait_until(lambda: receiver.named("send hooked-traced"), 15, "the webhook span")
    (span,) = receiver.named("send hooked-traced")
    assert span.span_id == span_id and span.parent_span_id == _ids(send)[1]


async def test_an_untraced_broker_passes_the_message_s_own_traceparent_on(
    start_broker: StartBroker, sink: Sink
) -> None:
    # Given a broker that traces nothing (the default)
    broker = start_broker("memory://", DEJAQ_WEBHOOK_ALLOW="127.0.0.1")
    own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    async with Client(broker.address) as client:
        await Admin(client).create_topic("hooked-own", TopicSettings(webhook=Webhook(sink.url)))
        # When a message carrying its own trace context is due
        async with Producer(client, "hooked-own") as producer:
            await producer.send(
                b"x", id="w3", headers={"traceparent": own, "tracestate": "vendor=x"}
            )
        await wait_until(lambda: sink.ok_ids(), 15, "the webhook request")
    # Then the request carries it as it is
    assert sink.hits[0].headers["traceparent"] == own
    assert sink.hits[0].headers["tracestate"] == "vendor=x"


@pytest.fixture(params=["memory", "sqlite", "redis", "redis-cluster", "postgres"])
def any_storage(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store of each backend, for a broker of the test's own."""
    if request.param == "memory":
        return "memory://"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'traced.db'}"
    return empty_served_store(request, str(request.param), "traced")


async def test_the_trace_context_travels_through_every_backend_s_store(
    start_broker: StartBroker, any_storage: str, otel: Otel
) -> None:
    # Given an untraced broker on each backend, and a message kept by its store
    broker = start_broker(any_storage)
    async with Client(broker.address) as client:
        await Admin(client).create_topic("stored-trace")
        async with Producer(client, "stored-trace") as producer:
            await producer.send(b"x", id="s1")
        # When it is consumed
        async with Consumer(client, "stored-trace") as consumer:
            async for delivery in consumer:
                await delivery.ack(confirm=True)
                break
    # Then the consumer's span is in the producer's trace, under its send span
    (send,) = otel.spans("send stored-trace")
    (process,) = otel.spans("process stored-trace")
    trace_id, send_id = _ids(send)
    assert _ids(process)[0] == trace_id
    assert process.parent is not None and f"{process.parent.span_id:016x}" == send_id
    assert process.attributes is not None
    assert process.attributes["messaging.message.id"] == "s1"
