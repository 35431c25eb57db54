"""close() lets deliveries being processed finish before the Goodbye.

A Goodbye releases the consumer's leases at once. A handler still working on a
delivery when ``close()`` is called must be able to ack it: close waits for it
(up to ``close_timeout_s``), and a Goodbye sent while some are still processed
releases nothing, so none goes to another consumer while its ack may come.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from dejaq.core.errors import NotFound
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer, Delivery
from dejaq.driver.producer import Outgoing
from dejaq.driver.settle import SettleFailure
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import consuming, create_topic, now_ms, produce, produce_one


@pytest.fixture
async def client(memory_broker: BrokerProcess) -> AsyncIterator[Client]:
    async with Client(memory_broker.address, timeout_s=10) as c:
        yield c


async def still_running(task: asyncio.Task[None], seconds: float) -> bool:
    done, _ = await asyncio.wait({task}, timeout=seconds)
    return not done


async def test_an_ack_of_a_message_processed_during_close_is_accepted(
    client: Client, topic_name: str
) -> None:
    # Given a handler working on a message under a 60 s lease
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    failures: list[SettleFailure] = []
    consumer = await Consumer(
        client, topic, lease_ms=60_000, on_settle_error=failures.append
    ).start()
    working, finish = asyncio.Event(), asyncio.Event()
    handled: list[str] = []

    async def handler(d: Delivery) -> None:
        working.set()
        await finish.wait()
        handled.append(d.id)

    runner = asyncio.create_task(consumer.run(handler))
    await asyncio.wait_for(working.wait(), 10)
    # When the consumer is closed while the handler still works
    closing = asyncio.create_task(consumer.close())
    # Then close waits for it
    assert await still_running(closing, 0.3)
    # When the handler finishes (and run() acks its message)
    finish.set()
    await asyncio.wait_for(closing, 10)
    await asyncio.wait_for(runner, 10)
    # Then the ack was accepted: the message is gone, never redelivered
    assert handled == [mid]
    assert failures == []
    with pytest.raises(NotFound):
        await Admin(client).get(topic, mid)
    async with consuming(client, topic) as other:
        await other.quiet_for(0.3)


async def test_a_loop_in_another_task_finishes_its_delivery_before_the_goodbye(
    client: Client, topic_name: str
) -> None:
    # Given an `async for` loop (in a task of its own) holding a message
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    consumer = await Consumer(client, topic, lease_ms=60_000).start()
    working, finish = asyncio.Event(), asyncio.Event()
    acked: list[str] = []

    async def loop() -> None:
        async for d in consumer:
            working.set()
            await finish.wait()
            await d.ack(confirm=True)
            acked.append(d.id)

    looping = asyncio.create_task(loop())
    await asyncio.wait_for(working.wait(), 10)
    # When another task closes the consumer, and then the loop acks
    closing = asyncio.create_task(consumer.close())
    assert await still_running(closing, 0.2)
    finish.set()
    await asyncio.wait_for(closing, 10)
    await asyncio.wait_for(looping, 10)
    # Then the confirmed ack went through and the loop ended
    assert acked == [mid]
    with pytest.raises(NotFound):
        await Admin(client).get(topic, mid)


async def test_a_goodbye_past_the_bound_releases_nothing_still_processed(
    client: Client, topic_name: str
) -> None:
    # Given a handler that does not finish within close's bound
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    consumer = await Consumer(
        client, topic, consumer_id="slow", lease_ms=60_000, close_timeout_s=0.2
    ).start()
    working, finish = asyncio.Event(), asyncio.Event()

    async def handler(d: Delivery) -> None:
        working.set()
        await finish.wait()

    runner = asyncio.create_task(consumer.run(handler))
    await asyncio.wait_for(working.wait(), 10)
    # When close gives up waiting
    await asyncio.wait_for(consumer.close(), 10)
    # Then the message stays leased to it (its ack may still come), not released
    admin = Admin(client)
    info = await admin.get(topic, mid)
    assert (info.state, info.message.lease_owner) == ("leased", "slow")
    async with consuming(client, topic) as other:
        await other.quiet_for(0.3)
    finish.set()
    await asyncio.wait_for(runner, 10)


async def test_a_loop_that_broke_out_closes_at_once(client: Client, topic_name: str) -> None:
    # Given a loop that leaves without settling what it took (the closing task
    # itself is not processing it)
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    async with Consumer(client, topic, lease_ms=60_000, close_timeout_s=30) as consumer:
        async for d in consumer:
            assert d.id == mid
            break
    # Then close did not wait for it, and the Goodbye released it at once
    async with consuming(client, topic) as other:
        again = await other.next(5)
        assert (again.id, again.deliveries) == (mid, 2)
        await again.ack(confirm=True)


async def test_close_does_not_wait_for_a_task_that_settled_and_works_on(
    client: Client, topic_name: str
) -> None:
    # Given a loop that acks its delivery, then works on something else for long
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    consumer = await Consumer(client, topic, lease_ms=60_000, close_timeout_s=30).start()
    acked, finish = asyncio.Event(), asyncio.Event()

    async def loop() -> None:
        async for d in consumer:
            await d.ack()
            acked.set()
            await finish.wait()

    looping = asyncio.create_task(loop())
    await asyncio.wait_for(acked.wait(), 10)
    # When the consumer is closed: it does not wait for the loop to come back
    await asyncio.wait_for(consumer.close(), 5)
    # Then the ack went through
    with pytest.raises(NotFound):
        await Admin(client).get(topic, mid)
    finish.set()
    await asyncio.wait_for(looping, 10)


async def test_tasks_that_took_deliveries_and_ended_are_forgotten(
    client: Client, topic_name: str
) -> None:
    # Given 300 messages, each taken by a short-lived task of its own that acks it
    topic = await create_topic(client, topic_name)
    await produce(client, topic, [Outgoing(b"x", now_ms(), id=f"t{i}") for i in range(300)])
    async with Consumer(client, topic, credits=50) as consumer:

        async def take_one() -> None:
            d = await consumer.receive(10)
            assert d is not None
            await d.ack()

        for _ in range(300):
            await asyncio.create_task(take_one())
        # Then the consumer does not keep every one of those tasks
        assert len(consumer._processing) < 2 * 64


async def test_a_close_from_another_task_is_not_cut_short_by_the_loop_leaving(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    """The usual shape: the loop owns ``async with Client(...)`` and
    ``async with Consumer(...)``; a shutdown handler calls close(). The loop then
    leaves both blocks while that close is still flushing: its own close must wait
    for the first, or the Client is closed under the flush and the acks are lost."""
    async with Client(memory_broker.address, timeout_s=10) as admin:
        topic = await create_topic(admin, topic_name)
        due = now_ms() + 300  # a steady flow: deliveries keep arriving while it closes
        messages = [Outgoing(b"x", due + i * 5, id=f"m{i}") for i in range(200)]
        await produce(admin, topic, messages)
    box: dict[str, Consumer] = {}
    failures: list[SettleFailure] = []
    got: list[str] = []
    started, halfway = asyncio.Event(), asyncio.Event()

    async def loop() -> None:
        async with Client(memory_broker.address, timeout_s=10) as client:
            async with Consumer(client, topic, on_settle_error=failures.append) as consumer:
                box["c"] = consumer
                started.set()
                async for d in consumer:
                    got.append(d.id)
                    await d.ack()
                    if len(got) == 100:
                        halfway.set()

    task = asyncio.create_task(loop())
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.wait_for(halfway.wait(), 10)
    # When another task closes the consumer
    await asyncio.wait_for(box["c"].close(), 5)
    await asyncio.wait_for(task, 5)
    # Then every ack it took was confirmed: nothing is left to redeliver
    assert not failures
    async with Client(memory_broker.address, timeout_s=10) as admin:
        counts = (await Admin(admin).describe_topic(topic)).counts
    assert counts.leased == 0
    assert counts.waiting + counts.due == 200 - len(got)
