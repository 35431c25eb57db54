"""Priority topics through the driver against a real broker: the most urgent
first, FIFO within a priority, Delivery.priority, move with a priority, the
sync twins, and bad input refused with its status."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import grpc
import pytest

from dejaq.core.errors import InvalidArgument
from dejaq.core.model import KIND_PRIORITY, InsertStatus, TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.cron import Cron
from dejaq.driver.producer import Outgoing, Producer
from dejaq.driver.sync import SyncClient
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import consuming, create_topic, now_ms, produce

pytestmark = pytest.mark.timeout(60)


async def next_millisecond() -> None:
    """Let the clock pass the current millisecond: the next message comes later."""
    await asyncio.sleep(0.003)


@pytest.fixture
async def mclient(memory_broker: BrokerProcess) -> AsyncIterator[Client]:
    async with Client(memory_broker.address) as c:
        yield c


async def test_a_backlog_is_delivered_most_urgent_first_fifo_within(
    client: Client, topic_name: str
) -> None:
    mclient = client
    # Given a priority topic with a backlog of mixed priorities, each produced in
    # a millisecond of its own (FIFO is by the millisecond a message came)
    topic = await create_topic(mclient, topic_name, kind=KIND_PRIORITY, priorities=10)
    order = [7, 0, 3, 0, 7, 3, 9, 0]
    now = now_ms()
    for n, p in enumerate(order):
        await produce(mclient, topic, [Outgoing(b"x", 0, f"m{n}-p{p}", priority=p)])
        await next_millisecond()
    # When a consumer takes them all
    async with consuming(mclient, topic, credits=100) as inbox:
        got = [await inbox.next() for _ in order]
        for d in got:
            await d.ack()
    # Then the most urgent come first, in arrival order within each priority
    expected = ["m1-p0", "m3-p0", "m7-p0", "m2-p3", "m5-p3", "m0-p7", "m4-p7", "m6-p9"]
    assert [d.id for d in got] == expected
    assert [d.priority for d in got] == sorted(order)
    # And each shows when it became available: a time, never a rank
    assert all(now - 60_000 < d.timestamp_ms <= d.received_at_ms for d in got)


async def test_an_idle_consumer_gets_each_message_as_it_is_produced(
    mclient: Client, topic_name: str
) -> None:
    topic = await create_topic(mclient, topic_name, kind=KIND_PRIORITY)
    async with consuming(mclient, topic, credits=10) as inbox, Producer(mclient, topic) as p:
        for prio in (50, 2, 99):
            result = await p.send(b"job", priority=prio)
            d = await inbox.next()
            assert (d.id, d.priority) == (result.id, prio)
            await d.ack()


async def test_move_changes_the_priority_and_get_shows_it(mclient: Client, topic_name: str) -> None:
    topic = await create_topic(mclient, topic_name, kind=KIND_PRIORITY, priorities=10)
    admin = Admin(mclient)
    await produce(mclient, topic, [Outgoing(b"a", 0, "lax", priority=9)])
    await produce(mclient, topic, [Outgoing(b"b", 0, "mid", priority=5)])
    lax = await admin.get(topic, "lax")
    assert lax.message.priority == 9 and lax.message.timestamp > 0
    moved = await admin.move(topic, "lax", lax.message.version, 0, priority=0)
    assert moved.timestamp_ms > 0
    assert (await admin.get(topic, "lax")).message.priority == 0
    async with consuming(mclient, topic, credits=10) as inbox:
        first, second = await inbox.next(), await inbox.next()
        await first.ack()
        await second.ack()
    assert [(first.id, first.priority), (second.id, second.priority)] == [("lax", 0), ("mid", 5)]


async def test_bad_priority_input_is_refused_and_stores_nothing(
    mclient: Client, topic_name: str
) -> None:
    admin = Admin(mclient)
    with pytest.raises(InvalidArgument, match="timeline, priority"):
        await admin.create_topic(topic_name, TopicSettings(kind="fifo"))
    with pytest.raises(InvalidArgument, match="between 1 and 1000"):
        await admin.create_topic(topic_name, TopicSettings(kind=KIND_PRIORITY, priorities=1001))
    topic = await create_topic(mclient, topic_name, kind=KIND_PRIORITY, priorities=4)
    async with Producer(mclient, topic) as p:
        out_of_range = await p.send(b"x", id="too-lax", priority=4)
    assert out_of_range.status == InsertStatus.REJECTED
    assert isinstance(out_of_range.error, InvalidArgument)
    timeline = await create_topic(mclient, topic_name + "-t")
    async with Producer(mclient, timeline) as p:
        on_timeline = await p.send(b"x", id="prio", priority=1)
    assert on_timeline.status == InsertStatus.REJECTED
    assert "timeline" in str(on_timeline.error)
    cron = Cron(mclient)
    with pytest.raises(InvalidArgument, match="priority 4 is out of range"):
        await cron.add(topic, "tick", "* * * * * *", b"x", priority=4)
    with pytest.raises(InvalidArgument, match="it takes no priority"):
        await cron.add(timeline, "tick", "* * * * * *", b"x", priority=1)
    assert await cron.list(topic) == [] and await cron.list(timeline) == []
    described = await admin.describe_topic(topic)
    assert described.counts.waiting + described.counts.due == 0


async def test_update_topic_refuses_a_new_kind_with_failed_precondition(
    stub: pb_grpc.TimelineStub, mclient: Client, topic_name: str
) -> None:
    topic = await create_topic(mclient, topic_name, kind=KIND_PRIORITY)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.UpdateTopic(pb.UpdateTopicRequest(name=topic, kind="timeline"))
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "fixed when it is created" in (refused.value.details() or "")


def test_the_sync_twins_take_and_show_priorities(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    with SyncClient(memory_broker.address) as client:
        client.admin.create_topic(topic_name, TopicSettings(kind=KIND_PRIORITY, priorities=8))
        producer = client.producer(topic_name)
        producer.send(b"lax", id="lax", priority=7)
        producer.send_batch([Outgoing(b"u", now_ms(), "urgent", priority=1)])
        producer.close()
        info = client.admin.get(topic_name, "lax")
        client.admin.move(topic_name, "lax", info.message.version, 0, priority=0)
        consumer = client.consumer(topic_name, credits=10)
        first = consumer.receive(timeout=10)
        second = consumer.receive(timeout=10)
        first.ack()
        second.ack()
        consumer.close()
        assert [(first.id, first.priority), (second.id, second.priority)] == [
            ("lax", 0),
            ("urgent", 1),
        ]
