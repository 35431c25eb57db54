"""JetStream -> dejaq -> JetStream against real nats-servers: 50,000 messages
out of order, due over 20 s, leave each once, in due order within a key, none
before its time (by the sink stream's own timestamps); a kill -9 of the
source's server and then of the sink's, mid-run, loses nothing."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections import Counter

import nats
import pytest
from nats.aio.client import Client as NatsClient
from nats.js import JetStreamContext

from dejaq.core.model import TopicSettings
from tests.bridges.queue_pairs import (
    COUNT,
    LEAD_MS,
    LEASE_MS,
    SPREAD_MS,
    early,
    out_of_due_order,
    report,
    running_bridge,
)
from tests.bridges.support import KEYS, TOPIC, Published, until
from tests.nats_server import NatsServer
from tests.servers import require_binary, temporary_root

pytestmark = pytest.mark.timeout(180)


def bridges_file(source_url: str, in_stream: str, sink_url: str, out_stream: str) -> str:
    """One bridge from stream ``in_stream`` to subject ``<out_stream>.out``,
    due by ``due_ms``, id by ``id``, keyed by ``user``."""
    return f"""
bridges:
  - name: js
    source: {{url: "{source_url}", stream: "{in_stream}", durable: "dejaq", ack_wait: 2}}
    topic: {TOPIC}
    due: {{field: "due_ms"}}
    id: {{field: "id"}}
    key: {{field: "user"}}
    sink: {{url: "{sink_url}", subject: "{out_stream}.out"}}
"""


async def new_stream(client: NatsClient) -> str:
    name = f"s{uuid.uuid4().hex[:10]}"
    await client.jetstream().add_stream(name=name, subjects=[f"{name}.>"])
    return name


async def write(
    client: NatsClient, stream: str, count: int, spread_ms: int, first: int = 0, lead_ms: int = 500
) -> None:
    """``count`` messages into ``stream``, ids ``m<first>``..., each due at a
    random time from ``lead_ms`` to ``lead_ms + spread_ms`` from now: shuffled
    in due order."""
    now = int(time.time() * 1000)
    for i in range(first, first + count):
        due = now + lead_ms + random.randrange(spread_ms)
        headers = {"due_ms": str(due), "id": f"m{i}", "user": f"u{i % KEYS}"}
        await client.publish(f"{stream}.in", f"p{i}".encode(), headers=headers)
    await client.flush()
    js = client.jetstream()
    await until(lambda: holds(js, stream, first + count), 60, "the source stream filled")


async def holds(js: JetStreamContext, stream: str, count: int) -> bool:
    return bool((await js.stream_info(stream)).state.messages >= count)


async def published(client: NatsClient, stream: str) -> list[Published]:
    """The sink stream's messages, in stream order, with the time it stored each."""
    js = client.jetstream()
    total = (await js.stream_info(stream)).state.messages
    reader = await js.subscribe(f"{stream}.out", ordered_consumer=True)
    out: list[Published] = []
    while len(out) < total:
        message = await reader.next_msg(timeout=10)
        headers = message.headers or {}
        stored_ms = int(message.metadata.timestamp.timestamp() * 1000)
        out.append(Published(headers["id"], headers["user"], int(headers["due_ms"]), stored_ms))
    await reader.unsubscribe()
    return out


async def test_fifty_thousand_out_of_order_leave_in_due_order_each_once_none_early(
    nats_server: NatsServer,
) -> None:
    # Given a bridge from one stream to another through the topic
    client = await nats.connect(nats_server.url)
    try:
        in_stream, out_stream = await new_stream(client), await new_stream(client)
        js = client.jetstream()
        text = bridges_file(nats_server.url, in_stream, nats_server.url, out_stream)
        async with running_bridge(text, hold=COUNT) as bridge:
            # When 50,000 messages arrive out of order, due over 20 s
            await write(client, in_stream, COUNT, SPREAD_MS, lead_ms=LEAD_MS)
            await until(lambda: holds(js, out_stream, COUNT), 120, "all published")
            assert bridge.figure("published") == COUNT
        out = await published(client, out_stream)
    finally:
        await client.close()
    # Then each is published once, none before its time, in due order within each key
    assert len(out) == COUNT and {p.id for p in out} == {f"m{i}" for i in range(COUNT)}
    assert early(out) == []
    assert out_of_due_order(out) == []
    report(bridge, out)


async def test_a_kill_of_the_source_server_and_then_of_the_sink_server_loses_nothing(
    nats_server: NatsServer,
) -> None:
    # Given a bridge from a stream on one server to a stream on another
    sink_server = NatsServer(require_binary("nats-server"), temporary_root("nats-sink"))
    await asyncio.to_thread(sink_server.start)
    into = await nats.connect(nats_server.url)
    out = await nats.connect(sink_server.url)
    try:
        in_stream, out_stream = await new_stream(into), await new_stream(out)
        text = bridges_file(nats_server.url, in_stream, sink_server.url, out_stream)
        async with running_bridge(text, TopicSettings(lease_ms=LEASE_MS)) as bridge:
            # When messages flow, and the source's server is killed and started again
            await write(into, in_stream, 2000, 3000)
            await until(lambda: holds(out.jetstream(), out_stream, 200), 30, "publishing began")
            await into.close()
            nats_server.kill()
            await asyncio.to_thread(nats_server.start)
            into = await nats.connect(nats_server.url)
            await write(into, in_stream, 2000, 3000, first=2000)
            # and then the sink's
            await until(lambda: holds(out.jetstream(), out_stream, 2500), 30, "publishing went on")
            await out.close()
            sink_server.kill()
            await asyncio.to_thread(sink_server.start)
            out = await nats.connect(sink_server.url)
            await until(lambda: holds(out.jetstream(), out_stream, 4000), 120, "every message out")
            assert bridge.figure("errors") >= 2
        found = await published(out, out_stream)
    finally:
        await into.close()
        await out.close()
        sink_server.destroy()
    # Then every message came out, a duplicate only of an id written, none early
    assert set(Counter(p.id for p in found)) == {f"m{i}" for i in range(4000)}
    assert early(found) == []
