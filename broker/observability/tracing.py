"""The broker's spans, through the OpenTelemetry API: a ``produce {topic}``
span per produce frame, a ``lease {topic}`` span per lease call of a pass, a
``send {topic}`` CLIENT span per webhook request (whose context the receiver
gets as its ``traceparent``).

Off by default: ``--trace-sample`` (0..1) is the share of frames, passes and
requests traced, decided here (a broker traces a sample; its consumers'
spans are theirs). Each span is linked to the creation context of the messages
it carries (at most ``MAX_LINKS``), read from their ``traceparent`` header, and
parented to it when it carries exactly one: a message's trace then reads
producer, broker, consumer. ``dejaq broker`` sends the spans by OTLP/HTTP
(``export_from_environment``, the ``OTEL_EXPORTER_OTLP_*`` variables); an
embedded broker uses the application's provider.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from dejaq.core import headers as message_headers
from dejaq.core.errors import InvalidArgument

try:
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
except ImportError:  # the optional extra is not installed: --trace-sample is refused
    _trace = None  # type: ignore[assignment]
    _propagate = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from opentelemetry.trace import Link, Span, Tracer

SYSTEM = "dejaq"
SCOPE = "dejaq.broker"
SERVICE = "dejaq-broker"
MAX_LINKS = 32
INSTALL_HINT = "pip install 'dejaq-timeline[otel]'"


class BrokerTracing:
    """Whether to trace this frame, pass or request, and its span."""

    def __init__(self, sample: float, draw: Callable[[], float] = random.random) -> None:
        self.sample = sample if _trace is not None else 0.0
        self._draw = draw

    def _tracer(self) -> Tracer | None:
        """The tracer for one sampled operation, or None (not sampled, or off)."""
        if self.sample <= 0 or (self.sample < 1 and self._draw() >= self.sample):
            return None
        return _trace.get_tracer(SCOPE)

    def produce(self, topic: str, count: int, encoded: Sequence[bytes] | None) -> Span | None:
        """The span of one produce frame of ``count`` messages (their encoded
        headers in ``encoded``, None when none has any); None when not traced."""
        tracer = self._tracer()
        if tracer is None:
            return None
        parent, links = _contexts(encoded or ())
        return tracer.start_span(
            f"produce {topic}",
            context=parent if count == 1 else None,
            kind=_trace.SpanKind.SERVER,
            attributes=_attributes(topic, "receive", "produce", count),
            links=links,
        )

    def lease(self, topic: str) -> Span | None:
        """The span of one lease call of a dispatch pass; None when not traced."""
        tracer = self._tracer()
        if tracer is None:
            return None
        return tracer.start_span(
            f"lease {topic}",
            kind=_trace.SpanKind.INTERNAL,
            attributes=_attributes(topic, "receive", "lease", 0),
        )

    def leased(self, span: Span, encoded: Iterable[bytes], count: int) -> None:
        """The lease call behind ``span`` leased ``count`` messages."""
        span.set_attribute("messaging.batch.message_count", count)
        for link in _contexts(encoded)[1]:
            span.add_link(link.context, link.attributes)
        span.end()

    def webhook(
        self, topic: str, mid: str, deliveries: int, encoded: bytes, url: str
    ) -> tuple[Span | None, bytes]:
        """A webhook request's span (None when not traced) and the trace headers
        the request carries: the span's context, or else the message's own
        ``traceparent`` (and ``tracestate``) as it is."""
        tracer = self._tracer()
        if tracer is None:
            return None, own_trace_lines(encoded)
        parent, links = _contexts((encoded,))
        attrs = _attributes(topic, "send", "send", 1)
        attrs.update(
            {
                "messaging.message.id": mid,
                "dejaq.delivery": deliveries,
                "http.request.method": "POST",
                "url.full": url,
            }
        )
        span = tracer.start_span(
            f"send {topic}",
            context=parent,
            kind=_trace.SpanKind.CLIENT,
            attributes=attrs,
            links=links,
        )
        carrier: dict[str, str] = {}
        _propagate.inject(carrier, context=_trace.set_span_in_context(span))
        return span, _lines(carrier)


def webhook_answered(span: Span, status: int | None) -> None:
    """A traced webhook request ended with ``status`` (None: no answer came)."""
    if status is None:
        span.set_attribute("error.type", "no_answer")
        span.set_status(_trace.StatusCode.ERROR)
    else:
        span.set_attribute("http.response.status_code", status)
        if not 200 <= status < 300:
            span.set_attribute("error.type", str(status))
            span.set_status(_trace.StatusCode.ERROR)
    span.end()


def failed(span: Span, error: BaseException) -> None:
    """A traced operation failed with ``error``."""
    span.set_attribute("error.type", type(error).__qualname__)
    span.set_status(_trace.StatusCode.ERROR, str(error))


def _attributes(topic: str, operation: str, name: str, count: int) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": topic,
        "messaging.operation.type": operation,
        "messaging.operation.name": name,
    }
    if count != 1:
        attrs["messaging.batch.message_count"] = count
    return attrs


def _trace_headers(encoded: bytes) -> dict[str, str]:
    """A message's ``traceparent`` and ``tracestate`` headers, lower-cased."""
    if not encoded:
        return {}
    try:
        decoded = message_headers.decode(encoded)
    except msgspec.MsgspecError:
        return {}  # refused with its message by produce's checks, not here
    found = {}
    for name, value in decoded.items():
        lowered = name.lower()
        if lowered in ("traceparent", "tracestate"):
            found[lowered] = value
    return found


def _contexts(encoded: Iterable[bytes]) -> tuple[Any, list[Link]]:
    """The creation context of the only message that has one (else None), and
    links to those of the messages (at most ``MAX_LINKS``)."""
    links: list[Link] = []
    first = None
    for raw in encoded:
        carrier = _trace_headers(raw)
        if "traceparent" not in carrier:
            continue
        context = _propagate.extract(carrier)
        found = _trace.get_current_span(context).get_span_context()
        if not found.is_valid:
            continue
        first = first or context
        links.append(_trace.Link(found, {"messaging.operation.type": "create"}))
        if len(links) >= MAX_LINKS:
            break
    return first if len(links) == 1 else None, links


def own_trace_lines(encoded: bytes) -> bytes:
    """A message's own ``traceparent``/``tracestate`` as request header lines."""
    return _lines(_trace_headers(encoded)) if encoded else b""


def _lines(carrier: dict[str, str]) -> bytes:
    """Header lines (CRLF each) of the W3C trace context in ``carrier``."""
    out = b""
    for name in ("traceparent", "tracestate"):
        value = carrier.get(name)
        if value and value.isascii() and value.isprintable():
            out += f"{name}: {value}\r\n".encode("ascii")
    return out


def export_from_environment(sample: float) -> Callable[[], None] | None:
    """``dejaq broker --trace-sample``: unless a tracer provider is set already,
    set the SDK's, exporting by OTLP/HTTP where the ``OTEL_EXPORTER_OTLP_*``
    variables say (default http://localhost:4318); the function that flushes
    and shuts it down, or None when there is nothing to set up."""
    if sample <= 0 or _trace is None:
        return None
    if "OTEL_PYTHON_TRACER_PROVIDER" in os.environ:
        return None
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise InvalidArgument(
            f"--trace-sample needs the OpenTelemetry SDK and OTLP exporter: {INSTALL_HINT}"
        ) from exc
    name = os.environ.get("OTEL_SERVICE_NAME") or SERVICE
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    _trace.set_tracer_provider(provider)
    return provider.shutdown
