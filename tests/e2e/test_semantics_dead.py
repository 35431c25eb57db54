"""Max deliveries, the dead timeline and expiry, fairness and flow control,
against a real broker once per storage backend. A nack past max deliveries
is proved in-process: tests/broker/test_settle_inprocess.py."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest

from dejaq.core.errors import NotFound
from dejaq.core.wire.batches import decode_deliveries
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from dejaq.proto import dejaq_pb2 as pb
from tests.e2e.broker_process import Brokers
from tests.e2e.support import (
    ack_all,
    consuming,
    create_topic,
    dead_ids,
    dead_includes,
    now_ms,
    produce,
    produce_one,
    wait_until,
)

SHORT_LEASE_MS = 300


# -- max deliveries, the dead timeline, expiry --------------------------------


async def test_max_deliveries_sends_the_message_to_the_dead_timeline_then_redrive(
    client: Client, topic_name: str
) -> None:
    # Given a topic with max_deliveries=2 and a consumer that never acks
    topic = await create_topic(client, topic_name, max_deliveries=2)
    mid = await produce_one(client, topic, now_ms(), b"poison")
    admin = Admin(client)
    async with consuming(client, topic, lease_ms=SHORT_LEASE_MS) as inbox:
        first, second = await inbox.take(2, timeout_s=5)
        assert (first.id, second.id) == (mid, mid)
        assert (first.deliveries, second.deliveries) == (1, 2)
        # When the second lease expires too
        await wait_until(dead_includes(client, topic, mid), 5, "dead-lettering")
        # Then the message is on the dead timeline, payload kept, not delivered again
        (dead,) = await admin.list_dead(topic)
        assert (dead.message.id, dead.message.payload, dead.state) == (mid, b"poison", "dead")
        assert dead.message.deliveries == 2
        assert (await admin.get(topic, mid)).state == "dead"
        assert len(inbox.received) == 2
        # When it is redriven, due in 300 ms
        redrive_at = now_ms() + 300
        assert await admin.redrive(topic, [mid], timestamp_ms=redrive_at) == 1
        # Then it is delivered again at that time, its count starting over
        again = await inbox.next(timeout_s=5)
        assert (again.id, again.deliveries, again.payload) == (mid, 1, b"poison")
        assert again.timestamp_ms == redrive_at <= again.received_at_ms
        await again.ack(confirm=True)
    assert await dead_ids(client, topic) == set()


async def test_max_deliveries_1_is_at_most_once(client: Client, topic_name: str) -> None:
    # Given an at-most-once topic
    topic = await create_topic(client, topic_name, max_deliveries=1)
    mid = await produce_one(client, topic, now_ms())
    admin = Admin(client)
    async with consuming(client, topic, lease_ms=SHORT_LEASE_MS) as inbox:
        # When its message is delivered and never acked
        d = await inbox.next()
        assert (d.id, d.deliveries) == (mid, 1)
        # Then it is gone at once, never redelivered, not dead either
        with pytest.raises(NotFound):
            await admin.get(topic, mid)
        await inbox.quiet_for(3 * SHORT_LEASE_MS / 1000)
    assert await dead_ids(client, topic) == set()


async def test_max_deliveries_per_message_overrides_the_topic(
    client: Client, topic_name: str
) -> None:
    # Given a topic without a limit and messages allowed 1, 2 and unlimited deliveries
    topic = await create_topic(client, topic_name, max_deliveries=0)
    at = now_ms()
    await produce(
        client,
        topic,
        [
            Outgoing(b"", at, id="once", max_deliveries=1),
            Outgoing(b"", at + 1, id="twice", max_deliveries=2),
            Outgoing(b"", at + 2, id="unlimited"),
        ],
    )
    admin = Admin(client)
    async with consuming(client, topic, lease_ms=SHORT_LEASE_MS) as inbox:
        # When all three are delivered and none acked
        first = await inbox.take(3)
        assert [(d.id, d.deliveries) for d in first] == [
            ("once", 1),
            ("twice", 1),
            ("unlimited", 1),
        ]
        # Then the at-most-once message is gone on delivery
        with pytest.raises(NotFound):
            await admin.get(topic, "once")
        # and the others come back after their leases
        second = await inbox.take(2, timeout_s=5)
        assert sorted((d.id, d.deliveries) for d in second) == [("twice", 2), ("unlimited", 2)]
        await ack_all([d for d in second if d.id == "unlimited"])
        # and "twice" dies when its second lease runs out
        await wait_until(dead_includes(client, topic, "twice"), 5, "dead-lettering")
        assert {d.id for d in inbox.received} == {"once", "twice", "unlimited"}
        assert len(inbox.received) == 5


async def test_an_expired_message_is_dead_lettered_not_delivered(
    client: Client, topic_name: str
) -> None:
    # Given a topic whose messages expire 1 s after they are due, a message whose own
    # expiry is before its due time, one a long time overdue, and a healthy one after them
    topic = await create_topic(client, topic_name, expiry_ms=1_000)
    t = now_ms()
    await produce(
        client,
        topic,
        [
            Outgoing(b"", t + 300, id="expires-first", expires_at_ms=t + 100),
            Outgoing(b"", t - 10_000, id="overdue"),
            Outgoing(b"", t + 301, id="healthy"),
        ],
    )
    admin = Admin(client)
    async with consuming(client, topic) as inbox:
        # When they fall due
        d = await inbox.next(timeout_s=5)
        # Then only the healthy one is delivered; the others are dead
        assert d.id == "healthy"
        await d.ack(confirm=True)
        await wait_until(dead_includes(client, topic, "expires-first", "overdue"), 5, "expiry")
        assert await dead_ids(client, topic) == {"expires-first", "overdue"}
        assert (await admin.get(topic, "expires-first")).state == "dead"
        await inbox.quiet_for(0.2)


async def test_dead_messages_are_purged_after_the_topic_retention(
    brokers: Brokers, storage: str, topic_name: str
) -> None:
    # Given a broker sweeping every 100 ms, a topic keeping dead messages 500 ms,
    # and another keeping them forever
    broker = brokers.get(storage, DEJAQ_RETENTION_SWEEP_MS="100")
    async with Client(broker.address) as client:
        admin = Admin(client)
        short = await create_topic(client, topic_name, dead_retention_ms=500, expiry_ms=1)
        forever = await create_topic(client, f"{topic_name}-forever", expiry_ms=1)
        # When a message of each dies (a minute overdue, expiring 1 ms after due)
        died_at = {}
        for topic in (forever, short):
            await produce_one(client, topic, now_ms() - 60_000, id="old")
            async with consuming(client, topic):
                await wait_until(dead_includes(client, topic, "old"), 5, "dead-lettering")
            (dead,) = await admin.list_dead(topic)
            died_at[topic] = dead.message.timestamp
        # Then the short-lived one is purged once its retention has passed, not before
        await wait_until(lambda: _no_dead(client, short), 5, "the purge")
        assert now_ms() >= died_at[short] + 500
        with pytest.raises(NotFound):
            await admin.get(short, "old")
        # and the other is kept
        assert await dead_ids(client, forever) == {"old"}


async def _no_dead(client: Client, topic: str) -> bool:
    return not await dead_ids(client, topic)


# -- fairness and flow control ------------------------------------------------


async def test_two_consumers_share_the_due_messages(client: Client, topic_name: str) -> None:
    # Given two connected consumers with credit windows
    topic = await create_topic(client, topic_name)
    async with (
        consuming(client, topic, credits=10) as a,
        consuming(client, topic, credits=10) as b,
    ):
        # When 200 messages fall due
        results = await produce(
            client, topic, [Outgoing(b"%d" % i, now_ms() + 200) for i in range(200)]
        )
        await wait_until(lambda: len(a.received) + len(b.received) >= 200, 10, "200 deliveries")
        # Then each message went to exactly one of them, and neither was starved
        ids = [d.id for d in a.received + b.received]
        assert sorted(ids) == sorted(r.id for r in results)
        assert len(a.received) >= 20 and len(b.received) >= 20, (len(a.received), len(b.received))
        await ack_all(a.received)
        await ack_all(b.received)


async def test_a_consumer_that_takes_nothing_is_never_flooded(
    client: Client, topic_name: str
) -> None:
    # Given a raw consumer with a window of 5 credits that it never renews
    topic = await create_topic(client, topic_name)
    call = client.stub().Consume()
    await call.write(pb.ConsumeRequest(hello=pb.Hello(topic=topic, credits=5)))
    assert (await call.read()).WhichOneof("frame") == "welcome"
    slow: list[str] = []

    async def read_slow() -> None:
        while (frame := await call.read()) is not grpc.aio.EOF:
            if frame.WhichOneof("frame") == "deliveries":
                slow.extend(d.id for d in decode_deliveries(frame.deliveries)[0])

    reader = asyncio.create_task(read_slow())
    try:
        # and another consumer that keeps up
        async with consuming(client, topic, credits=20) as fast:
            # When 200 messages fall due
            await produce(client, topic, [Outgoing(b"", now_ms() + 200) for _ in range(200)])
            await wait_until(lambda: len(fast.received) + len(slow) >= 200, 10, "200 deliveries")
            # Then the slow one got its window and no more; the other got the rest
            assert len(slow) == 5
            assert len(fast.received) == 195
            assert not set(slow) & {d.id for d in fast.received}
            await ack_all(fast.received)
    finally:
        call.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.RpcError):
            await reader
