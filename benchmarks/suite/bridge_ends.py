"""The queues at the two ends of the bridge ``benchmarks/bridges.py`` runs:
their servers (the tests' own classes, from the real binaries), a writer of
the source and a reader of the sink.

A source end writes messages ``(id, due_ms, user)``: the payload, and the
fields the bridge's rule reads (``due_ms``, ``id``, ``user``). A sink end
counts what the sink holds and reads it back, with when each got there: the
sink server's own time where it keeps one (a Redis Stream's entry id, a
JetStream message's timestamp), else when a reader reading all along got it
(RabbitMQ keeps no time of a message's arrival).
"""

from __future__ import annotations

import abc
import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from suite.backends import ROOT

PAYLOAD = b"x" * 64
# A message written: its id, when it is due (epoch ms) and its key.
Written = tuple[str, int, str]


@dataclass(frozen=True)
class Out:
    id: str
    due_ms: int
    at_ms: int  # when the sink had it


@contextlib.contextmanager
def servers(kinds: set[str]) -> Iterator[dict[str, Any]]:
    """The servers of ``kinds`` ("redis", "nats", "rabbitmq") running, by kind."""
    sys.path.insert(0, str(ROOT))
    from tests.nats_server import NatsServer  # type: ignore[import-not-found]
    from tests.rabbitmq_server import RabbitMQServer  # type: ignore[import-not-found]
    from tests.redis_server import RedisServer  # type: ignore[import-not-found]
    from tests.servers import require_binary, running, temporary_root  # type: ignore[import-not-found]

    with contextlib.ExitStack() as stack:
        started: dict[str, Any] = {}
        if "redis" in kinds:
            redis = RedisServer(require_binary("redis-server"), temporary_root("bench"))
            started["redis"] = stack.enter_context(running(redis))
        if "nats" in kinds:
            nats = NatsServer(require_binary("nats-server"), temporary_root("bench-nats"))
            started["nats"] = stack.enter_context(running(nats))
        if "rabbitmq" in kinds:
            rabbit = RabbitMQServer.create(require_binary("rabbitmq-server"))
            started["rabbitmq"] = stack.enter_context(running(rabbit))
        yield started


class SourceEnd(abc.ABC):
    server: str  # the kind of server it is on

    @abc.abstractmethod
    def yaml(self, url: str) -> str:
        """The bridge's ``source:`` mapping."""

    @abc.abstractmethod
    async def open(self, url: str) -> None:
        """Connect, and make the stream or queue the bridge reads."""

    @abc.abstractmethod
    async def write(self, messages: list[Written]) -> None:
        """Write ``messages`` (in this order) to the source."""

    @abc.abstractmethod
    async def close(self) -> None: ...


class SinkEnd(abc.ABC):
    server: str
    at: str  # what ``Out.at_ms`` is

    @abc.abstractmethod
    def yaml(self, url: str) -> str:
        """The bridge's ``sink:`` mapping."""

    @abc.abstractmethod
    async def open(self, url: str) -> None:
        """Connect, and make the stream or queue the bridge publishes to."""

    @abc.abstractmethod
    async def count(self) -> int:
        """Messages the sink holds (or its reader got) so far."""

    @abc.abstractmethod
    async def published(self) -> list[Out]:
        """Every message the sink holds (or its reader got), in its order."""

    @abc.abstractmethod
    async def close(self) -> None: ...


def _fields(message: Written) -> dict[str, str]:
    mid, due, user = message
    return {"due_ms": str(due), "id": mid, "user": user}


# -- Redis Streams ------------------------------------------------------------


class RedisStreamIn(SourceEnd):
    server = "redis"

    def __init__(self) -> None:
        self.client: Any = None

    def yaml(self, url: str) -> str:
        stream_url = url.replace("redis://", "redis-stream://")
        return f'{{url: "{stream_url}", stream: "in", group: "dejaq"}}'

    async def open(self, url: str) -> None:
        import redis.asyncio as aioredis

        self.client = aioredis.Redis.from_url(url)

    async def write(self, messages: list[Written]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for message in messages:
            pipe.xadd("in", {"payload": PAYLOAD, **_fields(message)})
        await pipe.execute()

    async def close(self) -> None:
        await self.client.aclose()


class RedisStreamOut(SinkEnd):
    server = "redis"
    at = "the sink server's time (its entry ids)"

    def __init__(self) -> None:
        self.client: Any = None

    def yaml(self, url: str) -> str:
        return f'{{url: "{url.replace("redis://", "redis-stream://")}", stream: "out"}}'

    async def open(self, url: str) -> None:
        import redis.asyncio as aioredis

        self.client = aioredis.Redis.from_url(url)

    async def count(self) -> int:
        return int(await self.client.xlen("out"))

    async def published(self) -> list[Out]:
        out: list[Out] = []
        last = "-"
        while True:
            page = await self.client.xrange("out", min=last, count=20_000)
            if last != "-":
                page = page[1:]
            if not page:
                return out
            for entry_id, fields in page:
                at = int(entry_id.split(b"-")[0])
                out.append(Out(fields[b"id"].decode(), int(fields[b"due_ms"]), at))
            last = page[-1][0].decode()

    async def close(self) -> None:
        await self.client.aclose()


# -- NATS JetStream -----------------------------------------------------------


class JetStreamIn(SourceEnd):
    server = "nats"

    def __init__(self) -> None:
        self.client: Any = None

    def yaml(self, url: str) -> str:
        return f'{{url: "{url}", stream: "IN", durable: "dejaq"}}'

    async def open(self, url: str) -> None:
        import nats

        self.client = await nats.connect(url)
        await self.client.jetstream().add_stream(name="IN", subjects=["in"])

    async def write(self, messages: list[Written]) -> None:
        for message in messages:
            await self.client.publish("in", PAYLOAD, headers=_fields(message))
        await self.client.flush()

    async def close(self) -> None:
        await self.client.close()


class JetStreamOut(SinkEnd):
    server = "nats"
    at = "the sink server's time (each message's stream timestamp)"

    def __init__(self) -> None:
        self.client: Any = None

    def yaml(self, url: str) -> str:
        return f'{{url: "{url}", subject: "out"}}'

    async def open(self, url: str) -> None:
        import nats

        self.client = await nats.connect(url)
        await self.client.jetstream().add_stream(name="OUT", subjects=["out"])

    async def count(self) -> int:
        return int((await self.client.jetstream().stream_info("OUT")).state.messages)

    async def published(self) -> list[Out]:
        total = await self.count()
        out: list[Out] = []
        reader = await self.client.jetstream().subscribe("out", ordered_consumer=True)
        while len(out) < total:
            message = await reader.next_msg(timeout=10)
            headers = message.headers or {}
            at = int(message.metadata.timestamp.timestamp() * 1000)
            out.append(Out(headers["id"], int(headers["due_ms"]), at))
        await reader.unsubscribe()
        return out

    async def close(self) -> None:
        await self.client.close()


# -- RabbitMQ -----------------------------------------------------------------


class RabbitMQIn(SourceEnd):
    """Publishes to queue ``in`` through the default exchange, without
    confirms and not persistent, a batch in one write (the bridge's own
    ``amqp_batch``): the writer's cost kept low (TCP keeps them while the node
    runs)."""

    server = "rabbitmq"

    def __init__(self) -> None:
        self.connection: Any = None
        self.channel: Any = None

    def yaml(self, url: str) -> str:
        return f'{{url: "{url}", queue: "in"}}'

    async def open(self, url: str) -> None:
        import aiormq

        self.connection = await aiormq.connect(url)
        self.channel = await self.connection.channel(publisher_confirms=False)
        await self.channel.queue_declare("in", durable=True)

    async def write(self, messages: list[Written]) -> None:
        from dejaq.bridges import amqp_batch

        batch = [
            (PAYLOAD, amqp_batch.properties(_fields(m), None, persistent=False)) for m in messages
        ]
        await amqp_batch.publish(self.channel, "", "in", batch)

    async def close(self) -> None:
        await self.connection.close()


class RabbitMQOut(SinkEnd):
    """Queue ``out``, published to through the default exchange, read all
    along by a consumer without acks on aiormq (aio-pika's message objects
    left out: the reader's cost kept low, and its clock on time)."""

    server = "rabbitmq"
    at = "when this process's reader got each (RabbitMQ keeps no arrival time)"

    def __init__(self) -> None:
        self.connection: Any = None
        self.got: list[Out] = []

    def yaml(self, url: str) -> str:
        return f'{{url: "{url}", routing_key: "out"}}'

    async def open(self, url: str) -> None:
        import aiormq

        self.connection = await aiormq.connect(url)
        channel = await self.connection.channel(frame_buffer_size=3000)
        await channel.queue_declare("out", durable=True)
        await channel.basic_consume("out", self._take, no_ack=True)

    async def _take(self, incoming: Any) -> None:
        at = int(time.time() * 1000)
        headers = incoming.header.properties.headers or {}
        due = headers["due_ms"]
        mid = headers["id"]
        self.got.append(
            Out(
                mid.decode() if isinstance(mid, bytes) else str(mid),
                int(due.decode() if isinstance(due, bytes) else due),
                at,
            )
        )

    async def count(self) -> int:
        return len(self.got)

    async def published(self) -> list[Out]:
        return list(self.got)

    async def close(self) -> None:
        await self.connection.close()


# name -> (source end, sink end)
PAIRS: dict[str, tuple[type[SourceEnd], type[SinkEnd]]] = {
    "redis": (RedisStreamIn, RedisStreamOut),
    "jetstream": (JetStreamIn, JetStreamOut),
    "rabbitmq": (RabbitMQIn, RabbitMQOut),
    "rabbitmq-redis": (RabbitMQIn, RedisStreamOut),
}
