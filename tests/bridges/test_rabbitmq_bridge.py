"""RabbitMQ -> dejaq -> RabbitMQ, and RabbitMQ -> dejaq -> Redis Stream,
against a real rabbitmq-server and redis-server: 50,000 messages out of order,
due over 20 s, leave each once, in due order within a key, none before its
time; a kill -9 of the RabbitMQ node as the source and, apart, as the sink,
mid-run, loses nothing.

RabbitMQ keeps no time of a message's arrival, so at the RabbitMQ sink "none
before its time" is checked against when a consumer reading all along got it:
later than the publish by a delivery, never earlier. A Redis Stream sink's
entry ids carry its server's time."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter

import aio_pika
import aio_pika.abc
import pytest
import redis

from dejaq.core.model import TopicSettings
from tests.bridges.queue_pairs import (
    COUNT,
    LEAD_MS,
    LEASE_MS,
    SPREAD_MS,
    Running,
    early,
    out_of_due_order,
    report,
    running_bridge,
)
from tests.bridges.support import KEYS, TOPIC, Published, until
from tests.certs import Certs
from tests.rabbitmq_server import RabbitMQServer
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(240)


def bridges_file(source: str, sink: str) -> str:
    """One bridge from ``source`` to ``sink`` (YAML flow mappings), due by
    ``due_ms``, id by ``id``, keyed by ``user``."""
    return f"""
bridges:
  - name: rabbit
    source: {source}
    topic: {TOPIC}
    due: {{field: "due_ms"}}
    id: {{field: "id"}}
    key: {{field: "user"}}
    sink: {sink}
"""


def queue_end(server: RabbitMQServer, queue: str) -> str:
    return f'{{url: "{server.url}", queue: "{queue}"}}'


def exchange_end(server: RabbitMQServer, queue: str) -> str:
    """The default exchange, routing to ``queue``."""
    return f'{{url: "{server.url}", routing_key: "{queue}"}}'


def stream_end(server: RedisServer, stream: str, *, group: bool = False) -> str:
    url = server.url.replace("redis://", "redis-stream://")
    return f'{{url: "{url}", stream: "{stream}"{", group: dejaq" if group else ""}}}'


async def new_queue(channel: aio_pika.abc.AbstractChannel) -> str:
    return (await channel.declare_queue(f"q{uuid.uuid4().hex[:10]}", durable=True)).name


def message(i: int, now_ms: int, lead_ms: int, spread_ms: int) -> dict[str, str]:
    due = now_ms + lead_ms + random.randrange(spread_ms)
    return {"due_ms": str(due), "id": f"m{i}", "user": f"u{i % KEYS}"}


async def write(
    connection: aio_pika.abc.AbstractConnection,
    queue: str,
    count: int,
    spread_ms: int,
    first: int = 0,
    lead_ms: int = 500,
    persistent: bool = False,
) -> None:
    """``count`` messages into ``queue``, ids ``m<first>``..., each due at a
    random time from ``lead_ms`` to ``lead_ms + spread_ms`` from now. Persistent
    ones are confirmed; the others go without confirms, for speed (TCP keeps
    them while the node runs)."""
    now = int(time.time() * 1000)
    channel = await connection.channel(publisher_confirms=persistent)
    mode = aio_pika.DeliveryMode.PERSISTENT if persistent else aio_pika.DeliveryMode.NOT_PERSISTENT
    for start in range(first, first + count, 2000):
        await asyncio.gather(
            *(
                channel.default_exchange.publish(
                    aio_pika.Message(
                        f"p{i}".encode(),
                        headers=message(i, now, lead_ms, spread_ms),  # type: ignore[arg-type]
                        delivery_mode=mode,
                    ),
                    queue,
                )
                for i in range(start, min(start + 2000, first + count))
            )
        )
    await channel.close()


class Reader:
    """A consumer of the sink's queue all along: what it got, and when."""

    def __init__(self) -> None:
        self.got: list[Published] = []

    async def take(self, incoming: aio_pika.abc.AbstractIncomingMessage) -> None:
        at = int(time.time() * 1000)
        headers = {k: str(v) for k, v in (incoming.headers or {}).items()}
        assert incoming.message_id == headers["id"]  # the dejaq id, visible
        self.got.append(Published(headers["id"], headers["user"], int(headers["due_ms"]), at))
        await incoming.ack()

    async def has(self, count: int) -> bool:
        return len(self.got) >= count


def stream_entries(client: redis.Redis, stream: str) -> list[Published]:
    """A Redis Stream's entries, with the time in each entry id."""
    out: list[Published] = []
    for entry_id, fields in client.xrange(stream):
        f = {k.decode(): v.decode() for k, v in fields.items()}
        at = int(entry_id.split(b"-")[0])
        out.append(Published(f["id"], f["user"], int(f["due_ms"]), at))
    return out


def assert_each_once_in_order_none_early(bridge: Running, out: list[Published]) -> None:
    report(bridge, out)
    assert len(out) == COUNT and {p.id for p in out} == {f"m{i}" for i in range(COUNT)}
    assert early(out) == []
    assert out_of_due_order(out) == []


async def test_fifty_thousand_from_a_queue_to_an_exchange(rabbitmq_server: RabbitMQServer) -> None:
    # Given 50,000 messages in a queue, out of order, due over 20 s
    connection = await aio_pika.connect(rabbitmq_server.url)
    try:
        channel = await connection.channel()
        into, out = await new_queue(channel), await new_queue(channel)
        await write(connection, into, COUNT, SPREAD_MS, lead_ms=LEAD_MS)
        reader = Reader()
        await (await channel.get_queue(out)).consume(reader.take)
        # When a bridge takes them from the queue to another
        text = bridges_file(queue_end(rabbitmq_server, into), exchange_end(rabbitmq_server, out))
        async with running_bridge(text, hold=COUNT) as bridge:
            await until(lambda: reader.has(COUNT), 150, "all published")
    finally:
        await connection.close()
    # Then each is published once, none before its time, in due order within each key
    assert_each_once_in_order_none_early(bridge, reader.got)


async def test_fifty_thousand_from_a_queue_to_a_redis_stream(
    rabbitmq_server: RabbitMQServer, redis_server: RedisServer
) -> None:
    # Given 50,000 messages in a queue, out of order, due over 20 s
    connection = await aio_pika.connect(rabbitmq_server.url)
    stream = f"out-{uuid.uuid4().hex[:8]}"
    try:
        into = await new_queue(await connection.channel())
        await write(connection, into, COUNT, SPREAD_MS, lead_ms=LEAD_MS)
        # When a bridge takes them from the queue to a Redis Stream
        text = bridges_file(queue_end(rabbitmq_server, into), stream_end(redis_server, stream))
        with redis_server.client() as client:
            async with running_bridge(text, hold=COUNT) as bridge:
                await until(lambda: _has(client, stream, COUNT), 150, "all published")
            out = stream_entries(client, stream)
            client.delete(stream)
    finally:
        await connection.close()
    # Then each is published once, none before its time, in due order within each key
    assert_each_once_in_order_none_early(bridge, out)


async def _has(client: redis.Redis, stream: str, count: int) -> bool:
    return bool(client.xlen(stream) >= count)


async def test_a_kill_of_the_node_as_the_source_loses_nothing(
    rabbitmq_server: RabbitMQServer, redis_server: RedisServer
) -> None:
    # Given a bridge from a durable queue of persistent messages to a Redis Stream
    connection = await aio_pika.connect(rabbitmq_server.url)
    into = await new_queue(await connection.channel())
    stream = f"out-{uuid.uuid4().hex[:8]}"
    text = bridges_file(queue_end(rabbitmq_server, into), stream_end(redis_server, stream))
    with redis_server.client() as client:
        async with running_bridge(text, TopicSettings(lease_ms=LEASE_MS)) as bridge:
            # When messages flow and the node is killed, started again, and more come
            await write(connection, into, 2000, 3000, persistent=True)
            await until(lambda: _has(client, stream, 200), 30, "publishing began")
            await connection.close()
            rabbitmq_server.kill()
            await asyncio.to_thread(rabbitmq_server.start)
            connection = await aio_pika.connect(rabbitmq_server.url)
            await write(connection, into, 2000, 3000, 2000, persistent=True)
            want = {f"m{i}" for i in range(4000)}
            await until(lambda: _ids_at_least(client, stream, want), 120, "every message out")
            assert bridge.figure("errors") >= 1
        out = stream_entries(client, stream)
        client.delete(stream)
    await connection.close()
    # Then every message came out, a duplicate only of an id written, none early
    assert set(Counter(p.id for p in out)) == want
    assert early(out) == []


async def _ids_at_least(client: redis.Redis, stream: str, want: set[str]) -> bool:
    return {p.id for p in stream_entries(client, stream)} >= want


async def test_a_kill_of_the_node_as_the_sink_loses_nothing(
    rabbitmq_server: RabbitMQServer, redis_server: RedisServer
) -> None:
    # Given a bridge from a Redis Stream to a durable queue
    connection = await aio_pika.connect(rabbitmq_server.url)
    out = await new_queue(await connection.channel())
    await connection.close()
    stream = f"in-{uuid.uuid4().hex[:8]}"
    source = stream_end(redis_server, stream, group=True)
    text = bridges_file(source, exchange_end(rabbitmq_server, out))
    with redis_server.client() as client:
        async with running_bridge(text, TopicSettings(lease_ms=LEASE_MS)) as bridge:
            # When messages flow and the node is killed mid-run and started again
            now = int(time.time() * 1000)
            for i in range(4000):
                client.xadd(stream, {"payload": f"p{i}", **message(i, now, 500, 6000)})
            await until(lambda: _past(bridge, "published", 1000), 30, "publishing began")
            rabbitmq_server.kill()
            await asyncio.to_thread(rabbitmq_server.start)
            await until(lambda: _all_confirmed(bridge, 4000), 120, "every message out")
            assert bridge.figure("errors") >= 1
        client.delete(stream)
    # Then the queue holds every message, a duplicate only of an id written
    connection = await aio_pika.connect(rabbitmq_server.url)
    channel = await connection.channel()
    queue = await channel.declare_queue(out, passive=True)
    reader = Reader()
    await queue.consume(reader.take)
    await until(lambda: reader.has(queue.declaration_result.message_count or 0), 30, "read")
    await connection.close()
    assert set(Counter(p.id for p in reader.got)) == {f"m{i}" for i in range(4000)}


async def _past(bridge: Running, figure: str, count: int) -> bool:
    return bridge.figure(figure) >= count


async def _all_confirmed(bridge: Running, count: int) -> bool:
    """Every message taken and published, and none held in dejaq: each was
    acked there, which the bridge does once the sink confirmed it."""
    taken = bridge.figure("accepted") >= count and bridge.figure("published") >= count
    return taken and bridge.figure("held") == 0


async def test_both_ends_speak_amqps_trusting_the_ca_given_as_cafile(
    rabbitmq_server: RabbitMQServer, certs: Certs
) -> None:
    # Given a bridge whose source and sink reach the node over TLS, with the
    # test CA given as the URL's cafile (as docs/bridges-rabbitmq.md says)
    connection = await aio_pika.connect(rabbitmq_server.url)
    try:
        channel = await connection.channel()
        into, out = await new_queue(channel), await new_queue(channel)
        reader = Reader()
        await (await channel.get_queue(out)).consume(reader.take)
        url = rabbitmq_server.tls_url(certs.ca)
        text = bridges_file(
            f'{{url: "{url}", queue: "{into}"}}', f'{{url: "{url}", routing_key: "{out}"}}'
        )
        async with running_bridge(text) as bridge:
            # When messages arrive, then they leave through the same node
            await write(connection, into, 10, 10, lead_ms=0)
            await until(lambda: reader.has(10), 30, "published over TLS")
            assert bridge.figure("errors") == 0
    finally:
        await connection.close()
    assert sorted(p.id for p in reader.got) == sorted(f"m{i}" for i in range(10))


async def test_amqps_to_a_node_whose_ca_is_not_trusted_takes_nothing(
    rabbitmq_server: RabbitMQServer, certs: Certs
) -> None:
    # Given a bridge whose source trusts another CA than the node's
    connection = await aio_pika.connect(rabbitmq_server.url)
    try:
        into = await new_queue(await connection.channel())
        await write(connection, into, 5, 10, lead_ms=0)
        url = rabbitmq_server.tls_url(certs.other_ca)
        text = bridges_file(
            f'{{url: "{url}", queue: "{into}"}}', exchange_end(rabbitmq_server, into)
        )
        async with running_bridge(text) as bridge:
            # When it runs, then it counts the refused connections and takes nothing
            await until(lambda: _past(bridge, "errors", 2), 30, "the refusals counted")
            assert bridge.figure("accepted") == 0
    finally:
        await connection.close()
