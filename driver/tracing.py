"""OpenTelemetry traces and metrics of the producer and the consumer, through
the OpenTelemetry API only: the application chooses the SDK and its exporters
(``pip install 'dejaq-timeline[otel]'``) and sets them as the global providers.

Spans follow the messaging conventions: ``send {topic}`` (PRODUCER) per
produce frame, whose context each message carries in its W3C ``traceparent``
and ``tracestate`` headers (its creation context; a message that has a
``traceparent`` already keeps its own); ``process {topic}`` (CONSUMER) per
delivery the application takes, parented to and linked to the message's
creation context, ended when it is settled or the task takes the next one;
``settle {topic}`` (CLIENT) per settle frame.

Nil cost when off: without the API installed, or with no provider set (the
API's proxy, a no-op), ``tracer()`` and ``meter()`` answer None once per frame
and the per-message path does no header or span work at all.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dejaq.core import headers as header_codec
from dejaq.core.headers import MAX_HEADER_BYTES, MAX_HEADERS

try:
    from opentelemetry import metrics as _metrics
    from opentelemetry import propagate as _propagate
    from opentelemetry import trace as _trace
except ImportError:  # the optional extra is not installed: tracing is off
    _trace = None  # type: ignore[assignment]
    _metrics = None  # type: ignore[assignment]
    _propagate = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter
    from opentelemetry.trace import Link, Span, Tracer

SYSTEM = "dejaq"
SCOPE = "dejaq.driver"
TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
# Links a settle or send span keeps at most: a frame of 1000 would make spans
# too large for most back ends to take.
MAX_LINKS = 32
_TRACER_ENV = "OTEL_PYTHON_TRACER_PROVIDER"
_METER_ENV = "OTEL_PYTHON_METER_PROVIDER"


def tracer() -> Tracer | None:
    """The driver's tracer, or None while tracing is off (the API is not
    installed, or no tracer provider is set)."""
    if _trace is None:
        return None
    provider = _trace.get_tracer_provider()
    if isinstance(provider, _trace.ProxyTracerProvider | _trace.NoOpTracerProvider):
        if _TRACER_ENV not in os.environ:
            return None
    found = _tracers.get(provider)
    if found is None:
        found = _tracers[provider] = provider.get_tracer(SCOPE)
    return found


_tracers: dict[Any, Tracer] = {}


@dataclass(frozen=True, slots=True)
class Instruments:
    """The driver's metrics (the messaging conventions', and dejaq's lateness)."""

    sent: Counter
    consumed: Counter
    process_duration: Histogram
    lateness: Histogram


_instruments: dict[Any, Instruments] = {}


def meter() -> Instruments | None:
    """The driver's instruments, or None while metrics are off (no meter provider)."""
    if _metrics is None:
        return None
    provider = _metrics.get_meter_provider()
    if isinstance(provider, _metrics.NoOpMeterProvider) or type(provider).__name__ == (
        "_ProxyMeterProvider"
    ):
        if _METER_ENV not in os.environ:
            return None
    found = _instruments.get(provider)
    if found is None:
        found = _instruments[provider] = _make_instruments(provider.get_meter(SCOPE))
    return found


def _make_instruments(m: Meter) -> Instruments:
    return Instruments(
        sent=m.create_counter(
            "messaging.client.sent.messages", "{message}", "Messages the producer sent."
        ),
        consumed=m.create_counter(
            "messaging.client.consumed.messages",
            "{message}",
            "Deliveries the consumer handed to the application.",
        ),
        process_duration=m.create_histogram(
            "messaging.process.duration",
            "s",
            "From taking a delivery to settling it (or taking the next).",
        ),
        lateness=m.create_histogram(
            "dejaq.lateness",
            "s",
            "When a delivery reached the application minus when it was due.",
        ),
    )


def _server(address: str) -> dict[str, Any]:
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    attrs: dict[str, Any] = {"server.address": host or address}
    if port.isdigit():
        attrs["server.port"] = int(port)
    return attrs


def base_attributes(topic: str, operation: str, name: str, address: str) -> dict[str, Any]:
    """What every span of one operation on ``topic`` carries."""
    return {
        "messaging.system": SYSTEM,
        "messaging.destination.name": topic,
        "messaging.operation.type": operation,
        "messaging.operation.name": name,
        **_server(address),
    }


# -- the producer ---------------------------------------------------------------


class SendTrace:
    """The ``send {topic}`` span of one produce frame and the headers its
    messages carry."""

    __slots__ = ("carrier", "count", "instruments", "metric_attrs", "span")

    def __init__(
        self,
        tracer: Tracer | None,
        instruments: Instruments | None,
        topic: str,
        address: str,
        ids: Sequence[str],
        timestamps_ms: Sequence[int] | Any,
        keys: Sequence[str] | None,
    ) -> None:
        self.count = len(ids)
        self.instruments = instruments
        self.metric_attrs = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": topic,
            "messaging.operation.name": "send",
        }
        self.span: Span | None = None
        self.carrier: dict[str, str] = {}
        if tracer is None:
            return
        attrs = base_attributes(topic, "send", "send", address)
        if self.count == 1:
            attrs["messaging.message.id"] = ids[0]
            attrs["dejaq.due_ms"] = int(timestamps_ms[0])
            if keys and keys[0]:
                attrs["dejaq.key"] = keys[0]
        else:
            attrs["messaging.batch.message_count"] = self.count
        span = tracer.start_span(f"send {topic}", kind=_trace.SpanKind.PRODUCER, attributes=attrs)
        self.span = span
        if span.is_recording() or span.get_span_context().is_valid:
            _propagate.inject(self.carrier, context=_trace.set_span_in_context(span))

    def stamped(self, own: Sequence[bytes] | None) -> Sequence[bytes] | None:
        """Each message's encoded headers with the creation context written in
        (a message's own ``traceparent`` kept; one with no room left as it is)."""
        carrier = self.carrier
        if not carrier:
            return own
        context = header_codec.encode(carrier)
        if own is None:
            return [context] * self.count
        return [_stamp(h, carrier) if h else context for h in own]

    def done(self, task: asyncio.Future[list[Any]]) -> None:
        """The frame's task ended: answered, failed or cancelled."""
        if task.cancelled():
            self.ended(asyncio.CancelledError())
            return
        error = task.exception()
        if error is not None:
            self.ended(error)
            return
        self.ended(None, sum(1 for r in task.result() if r.error is not None))

    def ended(self, error: BaseException | None, refused: int = 0) -> None:
        """The frame was answered (or failed with ``error``)."""
        span = self.span
        if span is not None:
            if error is not None:
                span.set_attribute("error.type", type(error).__qualname__)
                span.set_status(_trace.StatusCode.ERROR, str(error))
            elif refused:
                span.set_attribute("dejaq.refused", refused)
            span.end()
        if self.instruments is not None:
            attrs = self.metric_attrs
            if error is not None:
                attrs = {**attrs, "error.type": type(error).__qualname__}
            self.instruments.sent.add(self.count, attrs)


def _stamp(encoded: bytes, carrier: dict[str, str]) -> bytes:
    own = header_codec.decode(encoded)
    if any(name.lower() == TRACEPARENT for name in own):
        return encoded  # its own creation context, set by whoever made it
    if len(own) + len(carrier) > MAX_HEADERS or _size(own) + _size(carrier) > MAX_HEADER_BYTES:
        return encoded  # no room: the message goes untraced rather than refused
    return header_codec.encode({**own, **carrier})


def _size(headers: Mapping[str, str]) -> int:
    return sum(len(k) + len(v.encode("utf-8", "replace")) for k, v in headers.items())


# -- the consumer ---------------------------------------------------------------


class ConsumeTrace:
    """What a consumer needs to trace the deliveries of one topic: made once
    per delivery frame while tracing or metrics are on."""

    __slots__ = ("attrs", "instruments", "metric_attrs", "topic", "tracer")

    def __init__(
        self, tracer: Tracer | None, instruments: Instruments | None, topic: str, address: str
    ) -> None:
        self.tracer = tracer
        self.instruments = instruments
        self.topic = topic
        self.attrs = base_attributes(topic, "process", "process", address)
        self.metric_attrs = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": topic,
            "messaging.operation.name": "process",
        }

    def taken(
        self,
        mid: str,
        due_ms: int,
        deliveries: int,
        key: str,
        headers: Mapping[str, str] | None,
        now_ms: int,
    ) -> Process:
        """The application took a delivery: its ``process`` span starts."""
        late_ms = max(0, now_ms - due_ms)
        if self.instruments is not None:
            self.instruments.consumed.add(1, self.metric_attrs)
            self.instruments.lateness.record(late_ms / 1000, self.metric_attrs)
        span = None
        if self.tracer is not None:
            attrs = {
                **self.attrs,
                "messaging.message.id": mid,
                "dejaq.due_ms": due_ms,
                "dejaq.lateness_ms": late_ms,
                "dejaq.delivery": deliveries,
            }
            if key:
                attrs["dejaq.key"] = key
            parent = creation_context(headers)
            links: list[Link] = []
            if parent is not None:
                found = _trace.get_current_span(parent).get_span_context()
                if found.is_valid:
                    links.append(_trace.Link(found, {"messaging.operation.type": "create"}))
            span = self.tracer.start_span(
                f"process {self.topic}",
                context=parent,
                kind=_trace.SpanKind.CONSUMER,
                attributes=attrs,
                links=links,
            )
        return Process(span, self.instruments, self.metric_attrs)


def creation_context(headers: Mapping[str, str] | None) -> Any:
    """The OpenTelemetry context a message's headers carry, or None."""
    if not headers or _propagate is None:
        return None
    if not any(name.lower() == TRACEPARENT for name in headers):
        return None
    carrier = {name.lower(): value for name, value in headers.items()}
    return _propagate.extract(carrier)


class Process:
    """One delivery being processed: its span (if traced) and its start."""

    __slots__ = ("ended", "instruments", "metric_attrs", "span", "started")

    def __init__(
        self, span: Span | None, instruments: Instruments | None, metric_attrs: dict[str, Any]
    ) -> None:
        self.span = span
        self.instruments = instruments
        self.metric_attrs = metric_attrs
        self.started = time.perf_counter()
        self.ended = False

    def failed(self, error: BaseException) -> None:
        """The application's handler raised ``error``."""
        if self.span is not None:
            self.span.set_attribute("error.type", type(error).__qualname__)
            self.span.set_status(_trace.StatusCode.ERROR, str(error))

    def end(self, outcome: str) -> None:
        """Settled (``ack``/``nack``) or left for the next (``next``); once."""
        if self.ended:
            return
        self.ended = True
        if self.span is not None:
            self.span.set_attribute("dejaq.settled", outcome)
            self.span.end()
        if self.instruments is not None:
            self.instruments.process_duration.record(
                time.perf_counter() - self.started, self.metric_attrs
            )


def span_of(held: object) -> Span | None:
    """The process span of a delivery being settled, if it was traced."""
    process = getattr(held, "_process", None)
    return process.span if process is not None else None


def current_context_of(process: Process | None) -> Any:
    """A context with ``process``'s span current, for work the application
    does under it (None: tracing is off)."""
    if process is None or process.span is None:
        return None
    return _trace.set_span_in_context(process.span)


# -- settles --------------------------------------------------------------------


class SettleTrace:
    """``settle {topic}`` spans, one per settle frame."""

    __slots__ = ("address", "topic")

    def __init__(self, topic: str, address: Callable[[], str]) -> None:
        self.topic = topic
        self.address = address  # the broker the consumer is connected to now

    def started(self, kind: str, count: int, spans: Iterable[Span | None]) -> Span | None:
        """A frame of ``count`` settles of ``kind`` leaves (None: tracing is off)."""
        t = tracer()
        if t is None:
            return None
        attrs = base_attributes(self.topic, "settle", kind, self.address())
        attrs["messaging.batch.message_count"] = count
        links: list[Link] = []
        for span in spans:
            if span is not None and len(links) < MAX_LINKS:
                links.append(_trace.Link(span.get_span_context()))
        return t.start_span(
            f"settle {self.topic}", kind=_trace.SpanKind.CLIENT, attributes=attrs, links=links
        )


def settle_ended(span: Span, error: BaseException | None, refused: int) -> None:
    """The broker answered a settle frame (``refused`` of its settles), or it
    was lost with ``error``."""
    if error is not None:
        span.set_attribute("error.type", type(error).__qualname__)
        span.set_status(_trace.StatusCode.ERROR, str(error))
    elif refused:
        span.set_attribute("dejaq.refused", refused)
        span.set_attribute("error.type", "refused")
    span.end()
