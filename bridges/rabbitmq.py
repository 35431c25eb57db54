"""The RabbitMQ ends of a bridge (docs/bridges-rabbitmq.md), over aiormq (the
AMQP client under aio-pika, which makes the connection and reads its URL).

The source consumes a queue with manual acks and a prefetch bound. A read
takes what arrived, lingering a few milliseconds for more when a batch is not
full, so that dejaq gets fewer, larger batches. An ack is one ``basic.ack``
with ``multiple`` up to the last delivery every one before which is settled.
A message consumed and never acknowledged goes back to the queue when the
channel closes, so after a restart it comes again, first. Its source id is its
AMQP ``message_id``; a message without one takes a digest of its body and
headers (``sha256:`` and 32 hex digits), so that a redelivery has the same id.
Its fields are its headers and its set properties, as text.

The sink publishes to an exchange with a routing key on a channel with
publisher confirms, persistent, mandatory (a message no queue takes is an
error, not a silent loss), with the dejaq id as ``message_id`` and the fields
as headers: a batch in one write, its confirms awaited together
(``amqp_batch``). A call returns once the server confirmed every message.

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

from dejaq.bridges import amqp_batch
from dejaq.bridges.endpoint_options import Options
from dejaq.bridges.endpoints import EndpointDown, Inbound, Outbound, Sink, Source
from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact

try:
    import aio_pika
    import aio_pika.abc
    import aiormq
    import aiormq.abc
    import aiormq.exceptions
except ImportError as missing:  # pragma: no cover - the extra is part of dev
    raise ImportError(
        "the RabbitMQ ends need aio-pika: pip install 'dejaq-timeline[bridges]'"
    ) from missing

SCHEMES = ("amqp", "amqps")
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10.0  # a declare, a confirm
DEFAULT_PREFETCH = 2_000
DEFAULT_LINGER_MS = 5
CHECK_INTERVAL_S = 0.1  # how soon a read waiting for messages sees a broken connection
# The properties that travel as fields when set: AMQP name -> aiormq's (pamqp's).
PROPERTIES = {
    "content_type": "content_type",
    "content_encoding": "content_encoding",
    "correlation_id": "correlation_id",
    "reply_to": "reply_to",
    "expiration": "expiration",
    "message_id": "message_id",
    "type": "message_type",
    "user_id": "user_id",
    "app_id": "app_id",
}
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
    except asyncio.CancelledError as error:
        # aiormq fails what waits on a channel that closed with the reason it
        # closed, which is a CancelledError when its reader was stopped: down,
        # unless this task itself is being cancelled.
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        raise EndpointDown(f"{what}: the channel closed") from error


async def _connect(url: str) -> aio_pika.abc.AbstractConnection:
    """A connection that does not reconnect by itself: the bridge does, by
    calling ``open`` again after ``EndpointDown``."""
    with down(f"cannot reach RabbitMQ at {redact(url)}"):
        return await aio_pika.connect(url, timeout=CONNECT_TIMEOUT_S)


async def _channel(
    connection: aio_pika.abc.AbstractConnection, *, confirms: bool
) -> aiormq.abc.AbstractChannel:
    """An aiormq channel of ``connection``. Its frame buffer stays aiormq's
    few frames: the connection's reader hands over to the channel's every
    few messages, so a backlog arriving at once is read a few messages at a
    time between the bridge's other work, not in one long turn of the loop."""
    assert connection.transport is not None  # connected
    return await connection.transport.connection.channel(
        publisher_confirms=confirms,
        on_return_raises=True,
        timeout=REQUEST_TIMEOUT_S,
    )


async def _close(connection: aio_pika.abc.AbstractConnection | None) -> None:
    if connection is not None and not connection.is_closed:
        # Closing a broken connection may end its channels' waits with a
        # CancelledError: down, and done with (``down``).
        with contextlib.suppress(EndpointDown), down("closing"):
            await connection.close()


def text(value: object) -> str:
    """An AMQP header or property value as text."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, datetime.datetime):
        return str(int(value.timestamp() * 1000))
    return str(value)


def fields_of(properties: aiormq.spec.Basic.Properties) -> dict[str, str]:
    """A message's set properties and its headers (a header wins over a
    property of its name)."""
    fields = {
        name: text(value)
        for name, attribute in PROPERTIES.items()
        if (value := getattr(properties, attribute, None)) not in (None, "")
    }
    if properties.timestamp is not None:
        fields["timestamp"] = text(properties.timestamp)
    if properties.priority:
        fields["priority"] = str(properties.priority)
    fields.update((str(name), text(value)) for name, value in (properties.headers or {}).items())
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
    """The messages the server pushed and ``read`` has not taken yet, in
    order, and the deliveries not acknowledged yet."""

    def __init__(self, channel: aiormq.abc.AbstractChannel | None = None) -> None:
        self.channel = channel
        self.messages: collections.deque[aiormq.abc.DeliveredMessage] = collections.deque()
        # Delivery tags not acknowledged yet, in delivery order (ascending),
        # and those of them the bridge is done with.
        self.unacked: collections.deque[int] = collections.deque()
        self.settled: set[int] = set()
        self._want = 1
        self._came = asyncio.Event()

    async def put(self, message: aiormq.abc.DeliveredMessage) -> None:
        self.messages.append(message)
        self.unacked.append(_tag_of(message))
        if len(self.messages) >= self._want:
            self._came.set()

    async def wait(self, count: int, seconds: float) -> None:
        """Until ``count`` messages are waiting or ``seconds`` passed."""
        if len(self.messages) >= count:
            return
        self._want = count
        self._came.clear()
        with contextlib.suppress(asyncio.TimeoutError):
            async with asyncio.timeout(seconds):
                await self._came.wait()
        self._want = 1

    def settle(self, tags: Sequence[int]) -> int | None:
        """Mark ``tags`` done; the last delivery up to which every one is
        done (to acknowledge with ``multiple``), None when the first not
        acknowledged is not done yet."""
        self.settled.update(tags)
        last = None
        while self.unacked and self.unacked[0] in self.settled:
            last = self.unacked.popleft()
            self.settled.discard(last)
        return last


class RabbitMQSource(Source):
    """Consumes ``queue`` with manual acks, at most ``prefetch`` unacknowledged;
    a read lingers up to ``linger_ms`` for a fuller batch."""

    def __init__(
        self,
        url: str,
        queue: str,
        prefetch: int = DEFAULT_PREFETCH,
        linger_ms: int = DEFAULT_LINGER_MS,
    ) -> None:
        self.url = _url(url)
        self.queue = queue
        self.prefetch = prefetch
        self.linger_ms = linger_ms
        self._connection: aio_pika.abc.AbstractConnection | None = None
        self._arrived = _Arrived()

    @classmethod
    def from_options(cls, url: str, options: Mapping[str, object]) -> RabbitMQSource:
        """Options: ``queue``, ``prefetch`` (unacknowledged messages at most),
        ``linger_ms`` (how long a read waits for a fuller batch; 0: not)."""
        read = Options(f"RabbitMQ source {redact(url)}", options)
        source = cls(
            url,
            queue=read.text("queue"),
            prefetch=read.count("prefetch", DEFAULT_PREFETCH, 65_535),
            linger_ms=read.count("linger_ms", DEFAULT_LINGER_MS, 1_000, minimum=0),
        )
        read.done()
        return source

    async def open(self) -> None:
        await self.close()
        connection = await _connect(self.url)
        try:
            with down(f"RabbitMQ queue {self.queue!r} on {redact(self.url)}"):
                channel = await _channel(connection, confirms=False)
                await channel.basic_qos(prefetch_count=self.prefetch, timeout=REQUEST_TIMEOUT_S)
                await channel.queue_declare(self.queue, passive=True, timeout=REQUEST_TIMEOUT_S)
                arrived = _Arrived(channel)
                await channel.basic_consume(
                    self.queue, arrived.put, no_ack=False, timeout=REQUEST_TIMEOUT_S
                )
        except BaseException:
            await _close(connection)
            raise
        self._connection, self._arrived = connection, arrived

    def _open_channel(self) -> aiormq.abc.AbstractChannel:
        channel = self._arrived.channel
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
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_ms / 1000
        while not arrived.messages:
            left = deadline - loop.time()
            if left <= 0:
                return []
            # A broken connection shows within a check interval.
            await arrived.wait(1, min(left, CHECK_INTERVAL_S))
            self._open_channel()
        if self.linger_ms:
            # Fewer, fuller batches: dejaq's cost is mostly a batch's, not a message's.
            await arrived.wait(min(limit, self.prefetch), self.linger_ms / 1000)
        count = min(limit, len(arrived.messages))
        return [_inbound(arrived.messages.popleft()) for _ in range(count)]

    async def ack(self, messages: Sequence[Inbound]) -> None:
        """One ``basic.ack`` with ``multiple`` up to the last delivery every
        one before which is done; messages after one still being handed over
        (a batch before them, in flight) are acknowledged with it."""
        if not messages:
            return
        channel = self._open_channel()
        arrived = self._arrived
        # A message of a channel closed since: it goes back to the queue, and
        # its tag means another message on this one.
        last = arrived.settle([_tag_of(m.token) for m in messages if _channel_of(m) is channel])
        if last is None:
            return
        # AMQP answers no ack: the frame waits until it is written, so a close
        # right after loses none.
        with down(f"acknowledging to RabbitMQ queue {self.queue!r}"):
            await channel.basic_ack(last, multiple=True)

    async def lag(self) -> int | None:
        channel = self._open_channel()
        with down(f"RabbitMQ queue {self.queue!r}"):
            declared = await channel.queue_declare(
                self.queue, passive=True, timeout=REQUEST_TIMEOUT_S
            )
        count = declared.message_count
        return None if count is None else int(count)

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        self._arrived = _Arrived()  # what it held goes back to the queue with the channel
        await _close(connection)


def _tag_of(message: object) -> int:
    assert isinstance(message, aiormq.abc.DeliveredMessage)
    tag = message.delivery_tag
    assert tag is not None  # consumed with acks: every delivery has one
    return tag


def _channel_of(message: Inbound) -> aiormq.abc.AbstractChannel:
    token = message.token
    assert isinstance(token, aiormq.abc.DeliveredMessage)
    return token.channel


def _inbound(message: aiormq.abc.DeliveredMessage) -> Inbound:
    properties = message.header.properties
    fields = fields_of(properties)
    headers = {str(n): text(v) for n, v in (properties.headers or {}).items()}
    return Inbound(
        payload=message.body,
        fields=fields,
        source_id=source_id(message.body, properties.message_id, headers),
        token=message,
    )


class RabbitMQSink(Sink):
    """Publishes to ``exchange`` (``""``: the default exchange) with ``routing_key``."""

    # Batches written while earlier ones await their confirms: a confirm
    # comes a round trip (and on a busy node a disk sync) after its publish,
    # and messages due meanwhile should not wait for it.
    window = 8

    def __init__(self, url: str, exchange: str, routing_key: str) -> None:
        self.url = _url(url)
        self.exchange_name = exchange
        self.routing_key = routing_key
        self._connection: aio_pika.abc.AbstractConnection | None = None
        self._channel: aiormq.abc.AbstractChannel | None = None

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
                channel = await _channel(connection, confirms=True)
                amqp_batch.confirm_in_order(channel)
                if self.exchange_name:
                    await channel.exchange_declare(
                        self.exchange_name, passive=True, timeout=REQUEST_TIMEOUT_S
                    )
        except BaseException:
            await _close(connection)
            raise
        self._connection, self._channel = connection, channel

    async def publish(self, messages: Sequence[Outbound]) -> None:
        await (await self.send(messages))

    async def send(self, messages: Sequence[Outbound]) -> asyncio.Future[None]:
        """Write ``messages`` in this order, in one write on the one channel
        (RabbitMQ keeps a channel's order, so a key's messages reach the queue
        in due order); what it returns resolves once RabbitMQ confirmed each."""
        channel = self._channel
        if (
            self._connection is None
            or self._connection.is_closed
            or channel is None
            or channel.is_closed
        ):
            raise EndpointDown(f"not connected to {redact(self.url)}")
        batch = [
            (
                m.payload,
                amqp_batch.properties(dict(m.fields), m.fields.get("id") or None, persistent=True),
            )
            for m in messages
        ]
        with down(self._where):
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                answers = await amqp_batch.send(
                    channel, self.exchange_name, self.routing_key, batch, mandatory=True
                )
        return asyncio.ensure_future(self._confirmed(answers))

    async def _confirmed(self, answers: asyncio.Future[list[object]]) -> None:
        with down(self._where):
            async with asyncio.timeout(REQUEST_TIMEOUT_S):
                outcomes = amqp_batch.outcomes(await answers)
        failed = next((outcome for outcome in outcomes if outcome is not None), None)
        if isinstance(failed, aiormq.exceptions.PublishError):
            raise EndpointDown(f"{self._where}: no queue takes it (unroutable)") from failed
        if failed is not None:
            # Refused (``basic.nack``), or the channel closed before the
            # confirms: none of the batch counts, the bridge publishes it again.
            raise EndpointDown(
                f"{self._where}: {type(failed).__name__} {failed}".rstrip()
            ) from failed

    @property
    def _where(self) -> str:
        return f"publishing to exchange {self.exchange_name!r} key {self.routing_key!r}"

    async def close(self) -> None:
        connection, self._connection, self._channel = self._connection, None, None
        await _close(connection)
