"""The broker's spans (``broker/observability/tracing.py``): sampled, parented
to and linked with the creation contexts the messages carry."""

from __future__ import annotations

from opentelemetry.trace import SpanKind

from dejaq.broker.observability.tracing import BrokerTracing, own_trace_lines
from dejaq.core import headers
from tests.otel import Otel

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OTHER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def carrying(traceparent: str, **more: str) -> bytes:
    return headers.encode({"traceparent": traceparent, **more})


def test_a_broker_without_a_sample_starts_no_span(otel: Otel) -> None:
    # Given the default: no sample
    broker = BrokerTracing(0.0)
    # Then nothing is traced, and a webhook request carries the message's own context
    assert broker.produce("t", 1, [carrying(PARENT)]) is None
    assert broker.lease("t") is None
    span, lines = broker.webhook("t", "m1", 1, carrying(PARENT, tracestate="k=v"), "http://h/")
    assert span is None
    assert lines == f"traceparent: {PARENT}\r\ntracestate: k=v\r\n".encode()
    assert otel.spans() == []


def test_a_share_of_the_operations_is_traced(otel: Otel) -> None:
    # Given a sample of a quarter and draws above, then below it
    draws = iter([0.3, 0.2])
    broker = BrokerTracing(0.25, lambda: next(draws))
    # Then the first frame is left out and the second traced
    assert broker.produce("t", 3, None) is None
    span = broker.produce("t", 3, None)
    assert span is not None
    span.end()
    (done,) = otel.spans("produce t")
    assert done.kind == SpanKind.SERVER and done.attributes is not None
    assert done.attributes["messaging.batch.message_count"] == 3


def test_a_frame_of_one_message_continues_its_trace(otel: Otel) -> None:
    span = BrokerTracing(1.0).produce("t", 1, [carrying(PARENT)])
    assert span is not None
    span.end()
    (done,) = otel.spans("produce t")
    # Then the span is the message's trace's, its child, and linked to it
    assert done.context is not None and done.parent is not None
    assert f"{done.context.trace_id:032x}" == PARENT.split("-")[1]
    assert f"{done.parent.span_id:016x}" == PARENT.split("-")[2]
    assert [f"{link.context.span_id:016x}" for link in done.links] == [PARENT.split("-")[2]]


def test_a_frame_of_many_links_each_message_and_starts_a_trace(otel: Otel) -> None:
    span = BrokerTracing(1.0).produce("t", 3, [carrying(PARENT), b"", carrying(OTHER)])
    assert span is not None
    span.end()
    (done,) = otel.spans("produce t")
    assert done.parent is None
    assert [f"{link.context.trace_id:032x}" for link in done.links] == [
        PARENT.split("-")[1],
        OTHER.split("-")[1],
    ]


def test_a_lease_span_counts_and_links_what_it_leased(otel: Otel) -> None:
    broker = BrokerTracing(1.0)
    span = broker.lease("t")
    assert span is not None
    broker.leased(span, [carrying(PARENT), b""], 2)
    (done,) = otel.spans("lease t")
    assert done.attributes is not None
    assert done.attributes["messaging.batch.message_count"] == 2
    assert len(done.links) == 1


def test_a_traced_webhook_request_carries_its_span_s_context(otel: Otel) -> None:
    span, lines = BrokerTracing(1.0).webhook("t", "m1", 2, carrying(PARENT), "http://h/x")
    assert span is not None
    span.end()
    (done,) = otel.spans("send t")
    assert done.kind == SpanKind.CLIENT and done.context is not None
    assert lines.startswith(
        f"traceparent: 00-{done.context.trace_id:032x}-{done.context.span_id:016x}-01".encode()
    )
    # And the request's span continues the message's trace
    assert f"{done.context.trace_id:032x}" == PARENT.split("-")[1]


def test_headers_without_a_trace_context_give_no_lines() -> None:
    assert own_trace_lines(b"") == b""
    assert own_trace_lines(headers.encode({"x-env": "t"})) == b""


def test_headers_that_do_not_decode_are_no_trace_context(otel: Otel) -> None:
    # Given a frame whose headers are not a map (produce refuses that message itself)
    span = BrokerTracing(1.0).produce("t", 1, [b"\xc1not msgpack"])
    # Then its span starts all the same, with no parent and no link
    assert span is not None
    span.end()
    (done,) = otel.spans("produce t")
    assert done.parent is None and not done.links
