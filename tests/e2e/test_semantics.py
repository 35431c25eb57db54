"""The delivery contract against a real broker, once per storage backend:
leases, ack / nack / extend, move / cancel with versions, idempotent produce,
max deliveries and the dead timeline, expiry, fairness and flow control, and
what a consumer leaving (cleanly or not) does to its leases.
"""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest

from dejaq.core.errors import AlreadyExists, Leased, NotFound, StaleVersion
from dejaq.core.model import InsertStatus
from dejaq.core.wire.batches import decode_deliveries, decode_results, encode_messages
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer, Delivery
from dejaq.driver.producer import Outgoing, Producer
from dejaq.proto import dejaq_pb2 as pb
from tests.e2e.broker_process import STORAGES, BrokerProcess, Brokers
from tests.e2e.support import (
    EMPTY,
    ChildConsumer,
    ack_all,
    consuming,
    counts,
    create_topic,
    dead_ids,
    dead_includes,
    now_ms,
    produce,
    produce_one,
    wait_until,
)

SHORT_LEASE_MS = 300


@pytest.fixture(params=STORAGES)
def storage(request: pytest.FixtureRequest) -> str:
    """A storage kind, for tests that need a broker with settings of its own."""
    return str(request.param)


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


async def test_nack_redelivers_after_the_delay_not_before(client: Client, topic_name: str) -> None:
    # Given a delivered message
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    async with consuming(client, topic) as inbox:
        d = await inbox.next()
        # When it is nacked with a 500 ms delay
        nacked_at = now_ms()
        await d.nack(500, confirm=True)
        # Then it comes back once the delay is over, not earlier
        again = await inbox.next(timeout_s=5)
        assert again.id == mid
        assert again.deliveries == 2
        assert again.timestamp_ms >= nacked_at + 500
        assert again.received_at_ms >= again.timestamp_ms
        await again.ack(confirm=True)


async def test_extend_keeps_the_message_past_its_original_lease(
    client: Client, topic_name: str
) -> None:
    # Given a message delivered under a 500 ms lease
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    admin = Admin(client)
    async with consuming(client, topic, lease_ms=500) as inbox:
        d = await inbox.next()
        # When the consumer extends it to 5 s
        await d.extend(5_000)
        # Then it stays leased well past the first 500 ms and is not redelivered
        info = await admin.get(topic, mid)
        assert info.state == "leased"
        assert info.message.timestamp >= d.received_at_ms + 4_000
        await inbox.quiet_for(1.2)
        # and the holder can still ack it
        await d.ack(confirm=True)
    with pytest.raises(NotFound):
        await admin.get(topic, mid)


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


# -- producer mutations by id -------------------------------------------------


async def test_move_a_waiting_message_with_its_version(client: Client, topic_name: str) -> None:
    # Given a message waiting for a minute
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms() + 60_000)
    admin = Admin(client)
    before = (await admin.get(topic, mid)).message
    assert before.version == 1
    # When a move quotes a version that is not current
    with pytest.raises(StaleVersion):
        await admin.move(topic, mid, before.version + 1, now_ms() + 100)
    # Then nothing changed
    unchanged = (await admin.get(topic, mid)).message
    assert (unchanged.timestamp, unchanged.version) == (before.timestamp, before.version)
    # When the move quotes the current version
    target = now_ms() + 300
    moved = await admin.move(topic, mid, before.version, target)
    assert (moved.id, moved.timestamp_ms) == (mid, target)
    assert moved.version > before.version
    # Then the old version is stale
    with pytest.raises(StaleVersion):
        await admin.move(topic, mid, before.version, now_ms())
    # and the message is delivered at its new time
    async with consuming(client, topic) as inbox:
        d = await inbox.next(timeout_s=5)
        assert (d.id, d.timestamp_ms) == (mid, target)
        assert d.received_at_ms >= target
        await d.ack(confirm=True)


async def test_cancel_a_waiting_message_with_its_version(client: Client, topic_name: str) -> None:
    # Given a message due in 500 ms
    topic = await create_topic(client, topic_name)
    due = now_ms() + 500
    mid = await produce_one(client, topic, due)
    admin = Admin(client)
    version = (await admin.get(topic, mid)).message.version
    # When a cancel quotes a stale version
    with pytest.raises(StaleVersion):
        await admin.cancel(topic, mid, version + 1)
    # Then the message is still there
    assert (await admin.get(topic, mid)).message.version == version
    # When the cancel quotes the current version
    result = await admin.cancel(topic, mid, version)
    # Then it is deleted and never delivered
    assert result.version == 0
    with pytest.raises(NotFound):
        await admin.get(topic, mid)
    async with consuming(client, topic) as inbox:
        await inbox.quiet_for(max(0.0, (due - now_ms()) / 1000) + 0.5)


async def test_a_leased_message_cannot_be_moved_or_cancelled(
    client: Client, topic_name: str
) -> None:
    # Given a message leased by a consumer
    topic = await create_topic(client, topic_name)
    mid = await produce_one(client, topic, now_ms())
    admin = Admin(client)
    async with consuming(client, topic, lease_ms=60_000) as inbox:
        d = await inbox.next()
        held = (await admin.get(topic, mid)).message
        # When the producer tries to move or cancel it
        with pytest.raises(Leased):
            await admin.move(topic, mid, held.version, now_ms() + 60_000)
        with pytest.raises(Leased):
            await admin.cancel(topic, mid, held.version)
        # Then nothing changed and the holder can still ack it
        after = await admin.get(topic, mid)
        assert after.state == "leased"
        assert after.message.lease_owner == inbox.consumer.consumer_id
        assert (after.message.version, after.message.timestamp) == (held.version, held.timestamp)
        await d.ack(confirm=True)


# -- produce ------------------------------------------------------------------


async def test_produce_is_idempotent_by_id(client: Client, topic_name: str) -> None:
    # Given a message produced with id "order-42"
    topic = await create_topic(client, topic_name)
    at = now_ms() + 60_000
    admin = Admin(client)
    async with Producer(client, topic) as producer:
        (first,) = await producer.send_batch([Outgoing(b"first", at, id="order-42")])
        # When the same id is produced again, alone and twice within one batch
        (second,) = await producer.send_batch([Outgoing(b"second", at + 1, id="order-42")])
        third, fourth = await producer.send_batch(
            [Outgoing(b"a", at, id="order-43"), Outgoing(b"b", at + 1, id="order-43")]
        )
    # Then the repeats are DUPLICATE and the first message is untouched
    assert (first.status, second.status) == (InsertStatus.ACCEPTED, InsertStatus.DUPLICATE)
    assert (third.status, fourth.status) == (InsertStatus.ACCEPTED, InsertStatus.DUPLICATE)
    m = (await admin.get(topic, "order-42")).message
    assert (m.payload, m.timestamp, m.version) == (b"first", at, 1)
    assert (await admin.get(topic, "order-43")).message.payload == b"a"
    assert await counts(client, topic) == (2, 0, 0, 0)


async def test_ids_are_generated_when_empty(client: Client, topic_name: str) -> None:
    # Given messages without ids, from the driver and from a raw frame
    topic = await create_topic(client, topic_name)
    at = now_ms() + 60_000
    async with Producer(client, topic) as producer:
        driver_results = await asyncio.gather(
            producer.send(b"a", at_ms=at), producer.send(b"b", at_ms=at)
        )
    assert [r.status for r in driver_results] == [InsertStatus.ACCEPTED] * 2
    call = client.stub().Produce()
    await call.write(
        pb.ProduceRequest(topic=topic, batch=encode_messages([at, at], [b"c", b"d"], ids=None))
    )
    response = await call.read()
    await call.done_writing()
    assert await call.read() is grpc.aio.EOF
    raw_status, raw_ids = decode_results(response.results)
    # Then every message got a distinct id under which it can be read
    assert raw_status == [InsertStatus.ACCEPTED] * 2
    ids = [r.id for r in driver_results] + raw_ids
    assert all(ids) and len(set(ids)) == 4
    admin = Admin(client)
    payloads = [(await admin.get(topic, i)).message.payload for i in ids]
    assert payloads == [b"a", b"b", b"c", b"d"]


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


async def test_a_message_nacked_past_max_deliveries_goes_dead(
    client: Client, topic_name: str
) -> None:
    # Given a topic with max_deliveries=2 and a consumer that nacks everything
    topic = await create_topic(client, topic_name, max_deliveries=2)
    mid = await produce_one(client, topic, now_ms())
    async with consuming(client, topic) as inbox:
        first = await inbox.next()
        await first.nack(0, confirm=True)
        second = await inbox.next(timeout_s=5)
        assert (first.deliveries, second.deliveries) == (1, 2)
        # When it nacks the last allowed delivery
        await second.nack(0, confirm=True)
        # Then the message is dead at once, not delivered again
        assert await dead_ids(client, topic) == {mid}
        await inbox.quiet_for(0.2)


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
