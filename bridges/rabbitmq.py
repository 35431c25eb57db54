"""The RabbitMQ ends of a bridge (docs/bridges-rabbitmq.md), over aio-pika.

The source consumes a queue with manual acks and a prefetch bound. A message
consumed and never acknowledged goes back to the queue when the channel
closes, so after a restart it comes again, first. Its source id is its AMQP
``message_id``; a message without one takes a digest of its body and headers
(``sha256:`` and 32 hex digits), so that a redelivery has the same id. Its
fields are its headers and its set properties, as text.

The sink publishes to an exchange with a routing key on a channel with
publisher confirms, persistent, mandatory (a message no queue takes is an
error, not a silent loss), with the dejaq id as ``message_id`` and the fields
as headers. A call returns once the server confirmed every message.

URLs: ``amqp://user:password@host:port/vhost`` and ``amqps://`` (aio-pika's
URL options, ``cafile``, ``certfile``, ``keyfile``, ... apply).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import datetime
import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from urllib.parse import urlsplit

from dejaq.bridges.endpoint_options import Options
from dejaq.bridges.endpoints import EndpointDown, Inbound, Outbound, Sink, Source
from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact

try:
    import aio_pika
    import aio_pika.abc
    import aiormq.exceptions
except ImportError as missing:  # pragma: no cover - the extra is part of dev
    raise ImportError(
        "the RabbitMQ ends need aio-pika: pip install 'dejaq-timeline[bridges]'"
    ) from missing

SCHEMES = ("amqp", "amqps")
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0  # a declare, a confirm
DEFAULT_PREFETCH = 2_000
CHECK_INTERVAL_S = 0.1  # how soon a read waiting for messages sees a broken connection
# The properties that travel as fields when set (AMQP names).
PROPERTIES = (
    "content_type",
    "content_encoding",
    "correlation_id",
    "reply_to",
    "expiration",
    "message_id",
    "type",
    "user_id",
    "app_id",
)
DIGEST_PREFIX = "sha256:"

# What a broken, refused or closed connection or channel raises; a missing
# queue or exchange closes the channel (``ChannelNotFoundEntity``) too.
_DOWN: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    aiormq.exceptions.AMQPError,
    aiormq.exceptions.ChannelInvalidStateError,
)


def _url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise InvalidArgument(
            f"{redact(url)!r} is not an AMQP URL: amqp://host:port/vhost or amqps://"
        )
    return url


@contextlib.contextmanager
def down(what: str) -> Iterator[None]:
    """Raise ``EndpointDown`` for what a broken connection or channel raises."""
    try:
        yield
    except _DOWN as error:
        raise EndpointDown(f"{what}: {type(error).__name__} {error}".rstrip()) from error


async def _connect(url: str) -> aio_pika.abc.AbstractConnection:
    """A connection that does not reconnect by itself: the bridge does, by
    calling ``open`` again after ``EndpointDown``."""
    with down(f"cannot reach RabbitMQ at {redact(url)}"):
        return await aio_pika.connect(url, timeout=CONNECT_TIMEOUT_S)


async def _close(connection: aio_pika.abc.AbstractConnection | None) -> None:
    if connection is not None and not connection.is_closed:
        with contextlib.suppress(*_DOWN):
            await connection.close()


def text(value: object) -> str:
    """An AMQP header or property value as text."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, datetime.datetime):
        return str(int(value.timestamp() * 1000))
    return str(value)


def fields_of(message: aio_pika.abc.AbstractIncomingMessage) -> dict[str, str]:
    """Its set properties and its headers (a header wins over a property of its name)."""
    fields = {
        name: text(value)
        for name in PROPERTIES
        if (value := getattr(message, name, None)) not in (None, "")
    }
    if message.timestamp is not None:
        fields["timestamp"] = text(message.timestamp)
    if message.priority:
        fields["priority"] = str(message.priority)
    fields.update((str(name), text(value)) for name, value in (message.headers or {}).items())
    return fields


def source_id(body: bytes, message_id: str | None, headers: Mapping[str, str]) -> str:
    """``message_id``; without one a digest of the body and headers, the same
    on every redelivery."""
    if message_id:
        return message_id
    digest = hashlib.sha256(body)
    digest.update(json.dumps(sorted(headers.items())).encode())
    return DIGEST_PREFIX + digest.hexdigest()[:32]


class _Arrived:
    """The messages the server pushed and ``read`` has not taken yet, in order."""

    def __init__(self) -> None:
        self.messages: collections.deque[aio_pika.abc.AbstractIncomingMessage] = collections.deque()
        self.unacked: set[int] = set()  # the channel's delivery tags not acknowledged yet
        self._came = asyncio.Event()

    async def put(self, message: aio_pika.abc.AbstractIncomingMessage) -> None:
        self.messages.append(message)
        self.unacked.add(_tag_of(message))
        self._came.set()

    async def wait(self, seconds: float) -> None:
        """Until a message came or ``seconds`` passed."""
        self._came.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            async with asyncio.timeout(seconds):
                await self._came.wait()


class RabbitMQSource(Source):
    """Consumes ``queue`` with manual acks, at most ``prefetch`` unacknowledged."""

    def __init__(self, url: str, queue: str, prefetch: int = DEFAULT_PREFETCH) -> None:
        self.url = _url(url)
        self.queue = queue
        self.prefetch = prefetch
        self._connection: aio_pika.abc.AbstractConnection | None = None
        self._channel: aio_pika.abc.AbstractChannel | None = None
        self._arrived = _Arrived()

    @classmethod
    def from_options(cls, url: str, options: Mapping[str, object]) -> RabbitMQSource:
        """Options: ``queue``, ``prefetch`` (unacknowledged messages at most)."""
        read = Options(f"RabbitMQ source {redact(url)}", options)
        source = cls(
            url, queue=read.text("queue"), prefetch=read.count("prefetch", DEFAULT_PREFETCH, 65_535)
        )
        read.done()
        return source

    async def open(self) -> None:
        await self.close()
        connection = await _connect(self.url)
        try:
            with down(f"RabbitMQ queue {self.queue!r} on {redact(self.url)}"):
                channel = await connection.channel(publisher_confirms=False)
                await channel.set_qos(prefetch_count=self.prefetch)
                queue = await channel.get_queue(self.queue, ensure=True)
                arrived = _Arrived()
                await queue.consume(arrived.put, no_ack=False)
        except BaseException:
            await _close(connection)
            raise
        self._connection, self._channel, self._arrived = connection, channel, arrived

    def _open_channel(self) -> aio_pika.abc.AbstractChannel:
        channel = self._channel
        if (
            self._connection is None
            or self._connection.is_closed
            or channel is None
            or channel.is_closed
        ):
            raise EndpointDown(f"not connected to {redact(self.url)}")
        return channel

    async def read(self, limit: int, wait_ms: int) -> Sequence[Inbound]:
        self._open_channel()
        arrived = self._arrived
        deadline = asyncio.get_running_loop().time() + wait_ms / 1000
        while not arrived.messages:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                return []
            # A broken connection shows within a check interval.
            await arrived.wait(min(left, CHECK_INTERVAL_S))
            self._open_channel()
        count = min(limit, len(arrived.messages))
        return [_inbound(arrived.messages.popleft()) for _ in range(count)]

    async def ack(self, messages: Sequence[Inbound]) -> None:
        if not messages:
            return
        # AMQP answers no ack: the last frame waits until it is written (the
        # ones before it go first), so a close right after loses none.
        channel = self._open_channel()
        tags = sorted(_tag(message) for message in messages)
        arrived = self._arrived
        arrived.unacked.difference_update(tags)
        with down(f"acknowledging to RabbitMQ queue {self.queue!r}"):
            underlay = await channel.get_underlay_channel()
            if not arrived.unacked or min(arrived.unacked) > tags[-1]:
                # Every delivery up to the last of these is acknowledged now:
                # one frame says so for all of them.
                await underlay.basic_ack(tags[-1], multiple=True)
                return
            for tag in tags:
                await underlay.basic_ack(tag, wait=tag == tags[-1])

    async def lag(self) -> int | None:
        channel = self._open_channel()
        with down(f"RabbitMQ queue {self.queue!r}"):
            queue = await channel.declare_queue(self.queue, passive=True, timeout=REQUEST_TIMEOUT_S)
        count = queue.declaration_result.message_count
        return None if count is None else int(count)

    async def close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        self._arrived = _Arrived()  # what it held goes back to the queue with the channel
        await _close(connection)


def _tag_of(message: aio_pika.abc.AbstractIncomingMessage) -> int:
    assert message.delivery_tag is not None  # consumed with acks: every delivery has one
    return message.delivery_tag


def _tag(message: Inbound) -> int:
    token = message.token
    assert isinstance(token, aio_pika.abc.AbstractIncomingMessage)
    return _tag_of(token)


def _inbound(message: aio_pika.abc.AbstractIncomingMessage) -> Inbound:
    fields = fields_of(message)
    headers = {str(n): text(v) for n, v in (message.headers or {}).items()}
    return Inbound(
        payload=message.body,
        fields=fields,
        source_id=source_id(message.body, message.message_id, headers),
        token=message,
    )


class RabbitMQSink(Sink):
    """Publishes to ``exchange`` (``""``: the default exchange) with ``routing_key``."""

    def __init__(self, url: str, exchange: str, routing_key: str) -> None:
        self.url = _url(url)
        self.exchange_name = exchange
        self.routing_key = routing_key
        self._connection: aio_pika.abc.AbstractConnection | None = None
        self._exchange: aio_pika.abc.AbstractExchange | None = None

    @classmethod
    def from_options(cls, url: str, options: Mapping[str, object]) -> RabbitMQSink:
        """Options: ``exchange`` (empty: the default exchange), ``routing_key``."""
        read = Options(f"RabbitMQ sink {redact(url)}", options)
        exchange = read.text("exchange", default="")
        sink = cls(url, exchange=exchange, routing_key=read.text("routing_key"))
        read.done()
        return sink

    async def open(self) -> None:
        await self.close()
        connection = await _connect(self.url)
        try:
            with down(f"RabbitMQ exchange {self.exchange_name!r} on {redact(self.url)}"):
                channel = await connection.channel(publisher_confirms=True, on_return_raises=True)
                if self.exchange_name:
                    exchange = await channel.get_exchange(self.exchange_name, ensure=True)
                else:
                    exchange = channel.default_exchange
        except BaseException:
            await _close(connection)
            raise
        self._connection, self._exchange = connection, exchange

    async def publish(self, messages: Sequence[Outbound]) -> None:
        exchange = self._exchange
        if self._connection is None or self._connection.is_closed or exchange is None:
            raise EndpointDown(f"not connected to {redact(self.url)}")
        where = f"publishing to exchange {self.exchange_name!r} key {self.routing_key!r}"
        try:
            with down(where):
                # Each publish takes the channel's lock in turn (FIFO), so they go
                # out in this order; their confirms come back together.
                async with asyncio.timeout(REQUEST_TIMEOUT_S):
                    outcomes = await asyncio.gather(
                        *(
                            exchange.publish(_message(m), self.routing_key, mandatory=True)
                            for m in messages
                        ),
                        return_exceptions=True,
                    )
                for outcome in outcomes:
                    if isinstance(outcome, BaseException):
                        raise outcome
        except EndpointDown as error:
            if isinstance(error.__cause__, aiormq.exceptions.PublishError):
                raise EndpointDown(f"{where}: no queue takes it (unroutable)") from error.__cause__
            raise

    async def close(self) -> None:
        connection, self._connection, self._exchange = self._connection, None, None
        await _close(connection)


def _message(message: Outbound) -> aio_pika.Message:
    return aio_pika.Message(
        message.payload,
        headers=dict(message.fields),
        message_id=message.fields.get("id") or None,
        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
    )
