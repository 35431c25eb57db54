"""Which class serves an endpoint URL, by its scheme: the one table.

A queue's ends register here, each as a factory ``(url, options) -> Source``
(or ``Sink``) that checks its options and connects to nothing: ``open`` does.
The factories import their client library only when called, so
``dejaq.bridges`` imports with none installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from dejaq.bridges.endpoints import Sink, Source
from dejaq.core.errors import InvalidArgument

SourceFactory = Callable[[str, Mapping[str, Any]], Source]
SinkFactory = Callable[[str, Mapping[str, Any]], Sink]


def _redis_source(url: str, options: Mapping[str, Any]) -> Source:
    from dejaq.bridges.redis_streams import RedisStreamSource

    return RedisStreamSource(url, options)


def _redis_sink(url: str, options: Mapping[str, Any]) -> Sink:
    from dejaq.bridges.redis_streams import RedisStreamSink

    return RedisStreamSink(url, options)


def _nats_source(url: str, options: Mapping[str, Any]) -> Source:
    from dejaq.bridges.nats_jetstream import JetStreamSource

    return JetStreamSource.from_options(url, options)


def _nats_sink(url: str, options: Mapping[str, Any]) -> Sink:
    from dejaq.bridges.nats_jetstream import JetStreamSink

    return JetStreamSink.from_options(url, options)


def _rabbitmq_source(url: str, options: Mapping[str, Any]) -> Source:
    from dejaq.bridges.rabbitmq import RabbitMQSource

    return RabbitMQSource.from_options(url, options)


def _rabbitmq_sink(url: str, options: Mapping[str, Any]) -> Sink:
    from dejaq.bridges.rabbitmq import RabbitMQSink

    return RabbitMQSink.from_options(url, options)


# scheme -> factory
SOURCES: dict[str, SourceFactory] = {
    "redis-stream": _redis_source,
    "rediss-stream": _redis_source,
    "nats": _nats_source,
    "tls": _nats_source,
    "nats+tls": _nats_source,
    "amqp": _rabbitmq_source,
    "amqps": _rabbitmq_source,
}
SINKS: dict[str, SinkFactory] = {
    "redis-stream": _redis_sink,
    "rediss-stream": _redis_sink,
    "nats": _nats_sink,
    "tls": _nats_sink,
    "nats+tls": _nats_sink,
    "amqp": _rabbitmq_sink,
    "amqps": _rabbitmq_sink,
}


def _scheme(url: str) -> str:
    return url.partition("://")[0].lower()


def source(url: str, options: Mapping[str, Any]) -> Source:
    factory = SOURCES.get(_scheme(url))
    if factory is None:
        raise InvalidArgument(
            f"source.url: no source for scheme {_scheme(url)!r}: expected one of {sorted(SOURCES)}"
        )
    try:
        return factory(url, options)
    except InvalidArgument as exc:
        raise InvalidArgument(f"source: {exc}") from None


def sink(url: str, options: Mapping[str, Any], role: str = "sink") -> Sink:
    factory = SINKS.get(_scheme(url))
    if factory is None:
        raise InvalidArgument(
            f"{role}.url: no sink for scheme {_scheme(url)!r}: expected one of {sorted(SINKS)}"
        )
    try:
        return factory(url, options)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{role}: {exc}") from None
