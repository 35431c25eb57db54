"""The NATS JetStream ends of a bridge (docs/bridges-nats.md).

The source reads a stream through a durable pull consumer with explicit acks,
created when missing: the durable is the server's cursor, so a message read
and never acknowledged comes again once its ack wait ran out, after a restart
too. A message's source id is its stream sequence; its headers are its fields.

The sink publishes to a subject with the fields as headers and the dejaq id as
``Nats-Msg-Id``, so JetStream drops a duplicate within the stream's
duplicate window as well. A call writes every message before it waits, and
returns once JetStream acknowledged each one: one round trip a call, not one
a message.

URLs: ``nats://host:port`` and, over TLS, ``tls://`` or ``nats+tls://``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import ssl
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

from dejaq.bridges.endpoint_options import Options
from dejaq.bridges.endpoints import EndpointDown, Inbound, Outbound, Sink, Source
from dejaq.core.errors import InvalidArgument
from dejaq.core.redact import redact

try:
    import nats
    import nats.errors
    import nats.js.errors
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
    from nats.js.client import JetStreamContext
except ImportError as missing:  # pragma: no cover - the extra is part of dev
    raise ImportError(
        "the NATS JetStream ends need nats-py: pip install 'dejaq-timeline[bridges]'"
    ) from missing

SCHEMES = {"nats": "nats", "tls": "tls", "nats+tls": "tls"}
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 10  # a JetStream API call or a publish ack
DEFAULT_ACK_WAIT_S = 30.0  # JetStream's own default
DEFAULT_MAX_ACK_PENDING = 20_000
MSG_ID_HEADER = "Nats-Msg-Id"
_BREAKS_HEADER = re.compile(r"[\r\n]")

# What a broken or refused connection raises in nats-py; a JetStream 503 (not
# ready yet after a restart) is one too.
_DOWN: tuple[type[BaseException], ...] = (
    OSError,
    asyncio.TimeoutError,
    nats.errors.Error,
    nats.js.errors.ServiceUnavailableError,
)


@dataclass(frozen=True, slots=True)
class Connection:
    """Where the server is and how to reach it."""

    url: str  # as nats-py takes it: nats:// or tls://
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    @classmethod
    def read(cls, url: str, options: Options) -> Connection:
        parts = urlsplit(url)
        scheme = SCHEMES.get(parts.scheme)
        if scheme is None or not parts.hostname:
            raise InvalidArgument(
                f"{redact(url)!r} is not a NATS URL: nats://host:port, tls://host:port or nats+tls://"
            )
        ca, cert, key = (options.optional_text(n) for n in ("tls_ca", "tls_cert", "tls_key"))
        if (cert is None) != (key is None):
            raise InvalidArgument(f"{redact(url)}: tls_cert and tls_key go together")
        return cls(urlunsplit(parts._replace(scheme=scheme)), ca, cert, key)

    @property
    def where(self) -> str:
        """The URL for messages, without a password."""
        return redact(self.url)

    def _tls(self) -> ssl.SSLContext | None:
        if not self.url.startswith("tls:"):
            return None
        context = ssl.create_default_context(cafile=self.tls_ca)
        if self.tls_cert is not None:
            context.load_cert_chain(self.tls_cert, self.tls_key)
        return context

    async def connect(self) -> Client:
        """A connection that does not reconnect by itself: the bridge does, by
        calling ``open`` again after ``EndpointDown``."""
        with down(f"cannot reach NATS at {self.where}"):
            return await nats.connect(
                self.url,
                tls=self._tls(),
                allow_reconnect=False,
                connect_timeout=CONNECT_TIMEOUT_S,
                max_reconnect_attempts=0,
                error_cb=_quiet,
            )


async def _quiet(error: Exception) -> None:
    """nats-py's error callback: a broken connection shows as ``EndpointDown``
    at the next call instead."""


@contextlib.contextmanager
def down(what: str) -> Iterator[None]:
    """Raise ``EndpointDown`` for what a broken connection raises."""
    try:
        yield
    except nats.js.errors.NotFoundError as error:
        raise EndpointDown(f"{what}: {error.description or 'not found'}") from error
    except _DOWN as error:
        raise EndpointDown(f"{what}: {type(error).__name__} {error}".rstrip()) from error


async def _close(client: Client | None) -> None:
    if client is not None and not client.is_closed:
        with contextlib.suppress(*_DOWN):
            await client.close()


class JetStreamSource(Source):
    """A durable pull consumer on ``stream`` (filtered to ``subject`` when given)."""

    def __init__(
        self,
        connection: Connection,
        stream: str,
        durable: str,
        subject: str | None = None,
        ack_wait_s: float = DEFAULT_ACK_WAIT_S,
        max_ack_pending: int = DEFAULT_MAX_ACK_PENDING,
    ) -> None:
        self.connection = connection
        self.stream = stream
        self.durable = durable
        self.subject = subject
        self.ack_wait_s = ack_wait_s
        self.max_ack_pending = max_ack_pending
        self._client: Client | None = None
        self._subscription: JetStreamContext.PullSubscription | None = None

    @classmethod
    def from_options(cls, url: str, options: Mapping[str, object]) -> JetStreamSource:
        """Options: ``stream``, ``durable``, ``subject`` (a filter, optional),
        ``ack_wait`` (seconds), ``max_ack_pending``, ``tls_ca``, ``tls_cert``, ``tls_key``."""
        read = Options(f"JetStream source {redact(url)}", options)
        source = cls(
            Connection.read(url, read),
            stream=read.text("stream"),
            durable=read.text("durable"),
            subject=read.optional_text("subject"),
            ack_wait_s=read.seconds("ack_wait", DEFAULT_ACK_WAIT_S),
            max_ack_pending=read.count("max_ack_pending", DEFAULT_MAX_ACK_PENDING, 1_000_000),
        )
        read.done()
        return source

    def _consumer(self) -> ConsumerConfig:
        return ConsumerConfig(
            durable_name=self.durable,
            filter_subject=self.subject,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.ack_wait_s,
            max_ack_pending=self.max_ack_pending,
        )

    async def open(self) -> None:
        await self.close()
        client = await self.connection.connect()
        try:
            with down(f"JetStream stream {self.stream!r} or its durable {self.durable!r}"):
                js = client.jetstream(timeout=REQUEST_TIMEOUT_S)
                await js.stream_info(self.stream)  # a missing stream is named as such
                try:
                    await js.consumer_info(self.stream, self.durable)
                except nats.js.errors.NotFoundError:
                    # Made here rather than by pull_subscribe, which would filter
                    # on a subject even where none is given.
                    await js.add_consumer(self.stream, self._consumer())
                self._subscription = await js.pull_subscribe_bind(
                    durable=self.durable, stream=self.stream
                )
        except BaseException:
            await _close(client)
            raise
        self._client = client

    def _pull(self) -> JetStreamContext.PullSubscription:
        if self._client is None or self._client.is_closed:
            raise EndpointDown(f"not connected to {self.connection.where}")
        assert self._subscription is not None
        return self._subscription

    async def read(self, limit: int, wait_ms: int) -> Sequence[Inbound]:
        subscription = self._pull()
        with down(f"reading JetStream stream {self.stream!r}"):
            try:
                messages = await subscription.fetch(batch=limit, timeout=max(wait_ms, 10) / 1000)
            except TimeoutError:
                if self._client is None or self._client.is_closed:
                    raise
                return []  # nothing came in time
        return [_inbound(message) for message in messages]

    async def ack(self, messages: Sequence[Inbound]) -> None:
        if not messages:
            return
        client = self._client
        if client is None or client.is_closed:
            raise EndpointDown(f"not connected to {self.connection.where}")
        with down(f"acknowledging to JetStream stream {self.stream!r}"):
            for message in messages:
                assert isinstance(message.token, Msg)
                await message.token.ack()
            # The acks are plain publishes: the flush's round trip says the
            # server has them all.
            await client.flush(timeout=REQUEST_TIMEOUT_S)

    async def lag(self) -> int | None:
        subscription = self._pull()
        with down(f"consumer info of {self.durable!r}"):
            info = await subscription.consumer_info()
        return info.num_pending

    async def close(self) -> None:
        client, self._client, self._subscription = self._client, None, None
        await _close(client)


def _inbound(message: Msg) -> Inbound:
    return Inbound(
        payload=message.data,
        fields=dict(message.headers or {}),
        source_id=str(message.metadata.sequence.stream),
        token=message,
    )


@dataclass
class _Acks:
    """The publish acks a sink waits for, by reply subject."""

    waiting: dict[str, asyncio.Future[bytes]] = field(default_factory=dict)

    async def on_reply(self, message: Msg) -> None:
        future = self.waiting.pop(message.subject, None)
        if future is not None and not future.done():
            future.set_result(message.data)

    def fail_all(self, error: BaseException) -> None:
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(error)
        self.waiting.clear()


class JetStreamSink(Sink):
    """Publishes to ``subject``, which a JetStream stream must capture."""

    def __init__(self, connection: Connection, subject: str) -> None:
        self.connection = connection
        self.subject = subject
        self._client: Client | None = None
        self._inbox = ""
        self._acks = _Acks()
        self._sequence = 0

    @classmethod
    def from_options(cls, url: str, options: Mapping[str, object]) -> JetStreamSink:
        """Options: ``subject``, ``tls_ca``, ``tls_cert``, ``tls_key``."""
        read = Options(f"JetStream sink {redact(url)}", options)
        sink = cls(Connection.read(url, read), subject=read.text("subject"))
        read.done()
        return sink

    async def open(self) -> None:
        await self.close()
        client = await self.connection.connect()
        try:
            with down(f"no JetStream stream captures subject {self.subject!r}"):
                js = client.jetstream(timeout=REQUEST_TIMEOUT_S)
                await js.find_stream_name_by_subject(self.subject)
            with down(f"subscribing to the publish acks on {self.connection.where}"):
                self._inbox = client.new_inbox()
                await client.subscribe(f"{self._inbox}.*", cb=self._acks.on_reply)
        except BaseException:
            await _close(client)
            raise
        self._client = client

    async def publish(self, messages: Sequence[Outbound]) -> None:
        client = self._client
        if client is None or client.is_closed:
            raise EndpointDown(f"not connected to {self.connection.where}")
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[bytes]] = []
        try:
            with down(f"publishing to {self.subject!r}"):
                for message in messages:
                    self._sequence += 1
                    reply = f"{self._inbox}.{self._sequence}"
                    future: asyncio.Future[bytes] = loop.create_future()
                    self._acks.waiting[reply] = future
                    futures.append(future)
                    await client.publish(
                        self.subject, message.payload, reply=reply, headers=_headers(message)
                    )
                await client.flush(timeout=REQUEST_TIMEOUT_S)
                async with asyncio.timeout(REQUEST_TIMEOUT_S):
                    answers = await asyncio.gather(*futures)
        except BaseException as error:
            self._acks.fail_all(error)
            for future in futures:
                if future.done() and not future.cancelled():
                    future.exception()  # seen: no "never retrieved" warning
            raise
        for answer in answers:
            _check_ack(answer, self.subject)

    async def close(self) -> None:
        client, self._client = self._client, None
        self._acks.fail_all(EndpointDown("the sink was closed"))
        await _close(client)


def _headers(message: Outbound) -> dict[str, str]:
    """The fields as headers, and the dejaq id as ``Nats-Msg-Id``. dejaq's own
    headers hold no control character; a line break from elsewhere (a dead
    message's source fields) becomes a space, as it would end the header early."""
    headers = {
        _BREAKS_HEADER.sub(" ", name): _BREAKS_HEADER.sub(" ", value)
        for name, value in message.fields.items()
    }
    dejaq_id = headers.get("id")
    if dejaq_id:
        headers[MSG_ID_HEADER] = dejaq_id
    return headers


def _check_ack(answer: bytes, subject: str) -> None:
    """A publish ack is ``{"stream": ..., "seq": ...}``; an error or no stream
    (an empty "no responders" reply) means JetStream did not store it."""
    try:
        reply = json.loads(answer) if answer else {}
    except ValueError:
        reply = {}
    if not isinstance(reply, dict) or "error" in reply or "seq" not in reply:
        detail = reply.get("error", {}).get("description") if isinstance(reply, dict) else None
        raise EndpointDown(
            f"JetStream did not store a message for {subject!r}: {detail or answer!r}"
        )
