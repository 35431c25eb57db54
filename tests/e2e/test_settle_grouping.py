"""Grouped settles keep their promises: refusals reach the caller, nothing queued
is lost at close, and a consumer that dies with acks unsent loses no message."""

from __future__ import annotations

import asyncio
import sys

import pytest

from dejaq.core.clock import now_ms
from dejaq.core.errors import StaleVersion
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.delivery import Delivery
from dejaq.driver.producer import Outgoing
from dejaq.driver.settle import SettleFailure, SettleRejected
from dejaq.driver.sync import SyncClient

from .broker_process import BrokerProcess
from .support import EMPTY, consuming, counts, create_topic, produce, produce_one, wait_until

SHORT_LEASE_MS = 300


async def test_a_confirmed_ack_the_broker_refuses_raises(client: Client, topic_name: str) -> None:
    # Given a delivery whose lease expired and was delivered again
    topic = await create_topic(client, topic_name)
    await produce_one(client, topic, now_ms())
    async with consuming(client, topic, lease_ms=SHORT_LEASE_MS) as inbox:
        first = await inbox.next()
        second = await inbox.next(timeout_s=5)
        # When the stale handle is acked with confirmation
        # Then the refusal is raised to the caller, and the current one still acks
        with pytest.raises(StaleVersion):
            await first.ack(confirm=True)
        await second.ack(confirm=True)
    assert await counts(client, topic) == EMPTY


async def test_an_unconfirmed_refused_ack_reaches_the_callback_and_flush(
    client: Client, topic_name: str
) -> None:
    # Given a consumer with an error callback, holding a stale and a current handle
    topic = await create_topic(client, topic_name)
    await produce_one(client, topic, now_ms())
    refused: list[SettleFailure] = []
    async with consuming(
        client, topic, lease_ms=SHORT_LEASE_MS, on_settle_error=refused.append
    ) as inbox:
        first = await inbox.next()
        second = await inbox.next(timeout_s=5)
        # When both are acked without waiting
        await first.ack()
        await second.ack()
        # Then flush raises the refusal, naming the message and the reason
        with pytest.raises(SettleRejected) as caught:
            await inbox.consumer.flush()
        (failure,) = caught.value.failures
        assert (failure.id, failure.kind) == (first.id, "ack")
        assert isinstance(failure.error, StaleVersion)
        assert refused == [failure]
        # and a second flush has nothing left to report
        await inbox.consumer.flush()
    assert await counts(client, topic) == EMPTY


async def test_acks_queued_at_close_are_flushed_not_lost(client: Client, topic_name: str) -> None:
    # Given 500 due messages taken by a consumer
    topic = await create_topic(client, topic_name)
    now = now_ms()
    await produce(client, topic, [Outgoing(b"x", now) for _ in range(500)])
    consumer = await Consumer(client, topic, credits=500).start()
    taken = 0
    async for d in consumer:
        # When each is acked without waiting for an answer
        await d.ack()
        taken += 1
        if taken == 500:
            break
    # and the consumer closes at once
    await consumer.close()
    # Then every ack was applied: nothing waits, is due again, or is leased
    assert await counts(client, topic) == EMPTY


async def test_the_plain_loop_acks_everything(client: Client, topic_name: str) -> None:
    # Given 2,000 due messages
    topic = await create_topic(client, topic_name)
    now = now_ms()
    await produce(client, topic, [Outgoing(b"x", now) for _ in range(2_000)])
    seen: set[str] = set()
    # When the loop users write acks each one
    async with Consumer(client, topic) as consumer:
        async for d in consumer:
            seen.add(d.id)
            await d.ack()
            if len(seen) == 2_000:
                break
        await consumer.flush()
    # Then each arrived once, and all are gone
    assert len(seen) == 2_000
    assert await counts(client, topic) == EMPTY


async def test_run_with_concurrency_handles_and_acks_each(client: Client, topic_name: str) -> None:
    # Given 200 due messages and a handler that does I/O (awaits)
    topic = await create_topic(client, topic_name)
    now = now_ms()
    await produce(client, topic, [Outgoing(str(i).encode(), now) for i in range(200)])
    handled: list[bytes] = []
    in_flight = 0
    most = 0
    consumer = await Consumer(client, topic).start()

    async def handler(d: Delivery) -> None:
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        handled.append(d.payload)
        if len(handled) == 200:
            asyncio.get_running_loop().call_soon(asyncio.ensure_future, consumer.close())

    # When run with 8 handlers at a time
    await asyncio.wait_for(consumer.run(handler, concurrency=8), 30)
    # Then every message was handled once, several at a time, and acked
    assert sorted(handled) == sorted(str(i).encode() for i in range(200))
    assert most > 1
    assert await counts(client, topic) == EMPTY


DIES_WITH_ACKS_QUEUED = """
import asyncio, os, signal, sys
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer

async def main(address, topic, count):
    async with Client(address) as client:
        consumer = await Consumer(client, topic, lease_ms=1000, credits=count).start()
        taken = []
        async for d in consumer:
            taken.append(d)
            if len(taken) == count:
                break
        for d in taken:
            await d.ack()  # queued: leaves at the end of this event-loop turn
        print("acked", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # ... which never comes

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_a_consumer_killed_with_unsent_acks_loses_nothing(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    async with Client(memory_broker.address) as client:
        # Given 20 due messages
        topic = await create_topic(client, topic_name)
        now = now_ms()
        results = await produce(client, topic, [Outgoing(b"x", now) for _ in range(20)])
        # When a consumer process takes all 20, queues their acks and is killed
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            DIES_WITH_ACKS_QUEUED,
            memory_broker.address,
            topic,
            "20",
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await asyncio.wait_for(child.communicate(), 30)
        assert out.strip() == b"acked" and child.returncode == -9
        # Then all 20 are delivered again once their lease runs out (at-least-once)
        async with consuming(client, topic) as inbox:
            again = await inbox.take(20, timeout_s=10)
            assert {d.id for d in again} == {r.id for r in results}
            assert all(d.deliveries == 2 for d in again)
            for d in again:
                await d.ack()
            await inbox.consumer.flush()
        await wait_until(lambda: _empty(client, topic), what="an empty topic")


async def _empty(client: Client, topic: str) -> bool:
    return await counts(client, topic) == EMPTY


def test_the_sync_loop_acks_in_groups(memory_broker: BrokerProcess, topic_name: str) -> None:
    # Given 1,000 due messages and a synchronous client
    with SyncClient(memory_broker.address) as client:
        client.admin.create_topic(topic_name)
        producer = client.producer(topic_name)
        now = now_ms()
        producer.send_batch([Outgoing(b"x", now) for _ in range(1_000)])
        producer.close()
        consumer = client.consumer(topic_name)
        seen = set()
        # When the plain synchronous loop acks each one
        for d in consumer:
            seen.add(d.id)
            d.ack()
            if len(seen) == 1_000:
                break
        consumer.flush()
        consumer.close()
        # Then all were acked
        c = client.admin.describe_topic(topic_name).counts
        assert (len(seen), c.waiting, c.due, c.leased) == (1_000, 0, 0, 0)
