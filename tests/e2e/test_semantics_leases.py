"""Leases against a real broker, once per storage backend: redelivery after
the lease, ack, run and keep_alive, and what a consumer leaving (cleanly or
not) does to its leases. A nack's delay and an extend, judged to the
millisecond, are proved in-process: tests/broker/test_settle_inprocess.py."""

from __future__ import annotations

import asyncio

import pytest

from dejaq.core.errors import AlreadyExists, NotFound, StaleVersion
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer, Delivery
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import (
    EMPTY,
    ChildConsumer,
    ack_all,
    consuming,
    counts,
    create_topic,
    now_ms,
    produce,
    produce_one,
    wait_until,
)

SHORT_LEASE_MS = 300


# -- leases -------------------------------------------------------------------


async def test_an_unacked_message_is_redelivered_when_its_lease_expires(
    client: Client, topic_name: str
) -> None:
    # Given a due message and a consumer holding leases for 300 ms
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    async with consuming(client, topic, lease_ms=SHORT_LEASE_MS) as inbox:
        first = await inbox.next()
        # When it neither acks nor extends
        second = await inbox.next(timeout_s=5)
        # Then the message comes again after the lease, as its second delivery
        assert (first.id, second.id) == (mid, mid)
        assert (first.deliveries, second.deliveries) == (1, 2)
        assert second.received_at_ms >= first.lease_until_ms
        # and the first delivery's version is stale: only the current one acks
        with pytest.raises(StaleVersion):
            await first.ack(confirm=True)
        await second.ack(confirm=True)


async def test_ack_deletes_the_message(client: Client, topic_name: str) -> None:
    # Given a delivered message
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    admin = Admin(client)
    async with consuming(client, topic) as inbox:
        d = await inbox.next()
        assert (await admin.get(topic, mid)).state == "leased"
        # When it is acked
        await d.ack(confirm=True)
    # Then it is gone
    with pytest.raises(NotFound):
        await admin.get(topic, mid)
    assert await counts(client, topic) == EMPTY


async def test_run_acks_what_the_handler_handles_and_retries_what_it_raises_on(
    client: Client, topic_name: str
) -> None:
    # Given two due messages and a handler that fails the first time it sees "flaky"
    topic = await create_topic(client, topic_name)
    at = now_ms()
    await produce(client, topic, [Outgoing(b"", at, id="fine"), Outgoing(b"", at + 1, id="flaky")])
    seen: list[tuple[str, int]] = []
    handled_three = asyncio.Event()

    async def handler(d: Delivery) -> None:
        seen.append((d.id, d.deliveries))
        if len(seen) == 3:
            handled_three.set()
        if d.id == "flaky" and d.deliveries == 1:
            raise RuntimeError("a transient failure")

    # When a consumer runs the handler
    consumer = await Consumer(client, topic).start()
    runner = asyncio.create_task(consumer.run(handler))
    try:
        await asyncio.wait_for(handled_three.wait(), 10)
        # Then the failed message came back at once and everything handled was acked
        await wait_until(lambda: _is_empty(client, topic), 5, "acks")
    finally:
        await consumer.close()
        await asyncio.wait_for(runner, 10)
    assert sorted(seen) == [("fine", 1), ("flaky", 1), ("flaky", 2)]


async def _is_empty(client: Client, topic: str) -> bool:
    return await counts(client, topic) == EMPTY


async def test_keep_alive_holds_the_lease_while_the_work_runs(
    client: Client, topic_name: str
) -> None:
    # Given a message delivered under a 300 ms lease
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    async with consuming(client, topic, lease_ms=SHORT_LEASE_MS) as inbox:
        d = await inbox.next()
        # When the work takes several leases' time under keep_alive
        async with d.keep_alive():
            await inbox.quiet_for(4 * SHORT_LEASE_MS / 1000)
        # Then it was never redelivered and the holder acks it
        await d.ack(confirm=True)
    assert [(r.id, r.deliveries) for r in inbox.received] == [(mid, 1)]


# -- consumers leaving --------------------------------------------------------


async def test_a_clean_disconnect_releases_leases_at_once(client: Client, topic_name: str) -> None:
    # Given a consumer holding 10 messages under a 60 s lease
    topic = await create_topic(client, topic_name)
    await produce(client, topic, [Outgoing(b"", now_ms()) for _ in range(10)])
    async with consuming(client, topic, lease_ms=60_000) as leaver:
        held = await leaver.take(10)
        async with consuming(client, topic) as other:
            await other.quiet_for(0.2)  # leased: nobody else gets them
            # When it closes without acking
            await leaver.close()
            # Then another consumer gets them right away, not after the lease
            again = await other.take(10, timeout_s=5)
            assert sorted(d.id for d in again) == sorted(d.id for d in held)
            assert all(d.deliveries == 2 for d in again)
            assert max(d.received_at_ms for d in again) < min(d.lease_until_ms for d in held)
            await ack_all(again)


async def test_a_consumer_that_dies_keeps_its_leases_until_they_expire(
    broker: BrokerProcess, client: Client, topic_name: str
) -> None:
    # Given a consumer process holding 5 messages under a 2 s lease
    topic = await create_topic(client, topic_name)
    await produce(client, topic, [Outgoing(b"", now_ms()) for _ in range(5)])
    child = await ChildConsumer.start(broker.address, topic, count=5, lease_ms=2_000)
    # When the process dies without a goodbye
    await child.kill()
    lease_until = child.lease_until
    assert len(lease_until) == 5
    # Then the messages are redelivered once the leases expire, not before
    async with consuming(client, topic) as other:
        again = await other.take(5, timeout_s=10)
        assert sorted(d.id for d in again) == sorted(lease_until)
        for d in again:
            assert d.deliveries == 2
            assert d.received_at_ms >= lease_until[d.id], (d.received_at_ms, lease_until[d.id])
        await ack_all(again)


async def test_deleting_a_topic_ends_its_consumers_and_the_name_starts_afresh(
    client: Client, topic_name: str
) -> None:
    # Given a topic with a consumer and a waiting message
    topic = await create_topic(client, topic_name)
    await produce_one(client, topic, now_ms() + 60_000, id="old")
    admin = Admin(client)
    async with consuming(client, topic) as old_consumer:
        # When the topic is deleted
        await admin.delete_topic(topic)
        # Then its consumer's stream ends with NOT_FOUND
        with pytest.raises(NotFound):
            await old_consumer.next(timeout_s=5)
    with pytest.raises(NotFound):
        await admin.describe_topic(topic)
    # When a topic of that name is created again, at-most-once this time
    await create_topic(client, topic, max_deliveries=1)
    # Then it is empty, and it delivers under its new settings
    with pytest.raises(NotFound):
        await admin.get(topic, "old")
    mid = await produce_one(client, topic, now_ms(), id="new")
    async with consuming(client, topic, lease_ms=SHORT_LEASE_MS) as inbox:
        d = await inbox.next()
        assert (d.id, d.deliveries) == (mid, 1)
        with pytest.raises(NotFound):
            await admin.get(topic, mid)  # at-most-once: gone on delivery
        await inbox.quiet_for(3 * SHORT_LEASE_MS / 1000)


async def test_one_consumer_id_cannot_connect_twice_at_once(
    client: Client, topic_name: str
) -> None:
    # Given a connected consumer "only-one"
    topic = await create_topic(client, topic_name)
    async with consuming(client, topic, consumer_id="only-one"):
        # When a second consumer connects under the same id
        # Then it is refused
        with pytest.raises(AlreadyExists):
            await Consumer(client, topic, consumer_id="only-one").start()
    # and once the first has left, the id is free again
    async with consuming(client, topic, consumer_id="only-one") as inbox:
        assert inbox.consumer.consumer_id == "only-one"
