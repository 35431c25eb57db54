"""A broker process on ``redis+cluster://?wait_replicas=1`` through the ``kill -9`` of
a master while a producer and two consumers run through it (the producer and one
consumer sharing a client, as an application does): nothing acknowledged is lost,
nothing is early, no message is held by two consumers at once (but after a
lease lost with the master, which its holder's ack finds refused), and once the
cluster has a replica for every master again, delivery resumes within a bound."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

import pytest

from dejaq.core.errors import DejaqError
from dejaq.driver import Admin, Client, Consumer, Delivery, Producer
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import StartBroker
from tests.e2e.support import now_ms
from tests.redis_cluster import RedisCluster

pytestmark = pytest.mark.timeout(240)
TOPIC = "failover"
RATE, BATCH = 200, 10  # msgs/s produced, in batches of BATCH, due 50 ms after
BEFORE, AFTER = 600, 600  # acknowledged before the kill; produced once healthy again
LEASE_MS = 5_000
RESUME_S = 20.0  # healthy again -> a message due now is delivered (a stall never ends)
DRAIN_S = 90.0


@dataclass
class Ledger:
    produced: dict[str, int] = field(default_factory=dict)  # id -> due
    holder: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> (who, until)
    delivered: dict[str, int] = field(default_factory=dict)  # id -> deliveries seen
    acked: set[str] = field(default_factory=set)
    early: list[str] = field(default_factory=list)
    doubly_held: list[str] = field(default_factory=list)  # an acked message delivered again
    # (id, first holder, what happened): delivered while another consumer held it
    overlaps: list[tuple[str, str, str]] = field(default_factory=list)
    refused: set[tuple[str, str]] = field(default_factory=set)  # (id, who): its ack refused
    last_delivery: float = 0.0

    def got(self, who: str, d: Delivery) -> None:
        self.last_delivery = time.monotonic()
        if d.received_at_ms < d.timestamp_ms:
            self.early.append(d.id)
        previous = self.holder.get(d.id)
        if d.id in self.acked:
            self.doubly_held.append(f"{d.id} to {who} after its ack")
        elif previous is not None and previous[0] != who and previous[1] > d.received_at_ms:
            self.overlaps.append((d.id, previous[0], f"{d.id} to {who} while held by {previous}"))
        self.holder[d.id] = (who, d.lease_until_ms)
        self.delivered[d.id] = self.delivered.get(d.id, 0) + 1


async def produce(producer: Producer, ledger: Ledger, count: int) -> None:
    sent = 0
    while sent < count:
        due = now_ms() + 50
        batch = [Outgoing(b"x", due, id=f"m{len(ledger.produced) + i:05d}") for i in range(BATCH)]
        for m, r in zip(batch, await producer.send_batch(batch), strict=True):
            assert r.error is None, r.error
            ledger.produced[m.id] = m.timestamp_ms
        sent += BATCH
        await asyncio.sleep(BATCH / RATE)  # the producer's pace


async def consume(consumer: Consumer, who: str, ledger: Ledger) -> None:
    async for d in consumer:
        ledger.got(who, d)
        try:
            await d.ack(confirm=True)
            ledger.acked.add(d.id)
        except DejaqError:
            # refused while the storage fails over (delivered again after its
            # lease), or its lease was lost with the master (delivered again at once)
            ledger.refused.add((d.id, who))


async def left(client: Client) -> int:
    """Messages of the topic not acked yet (waiting, due or leased)."""
    counts = (await Admin(client).describe_topic(TOPIC)).counts
    return counts.waiting + counts.due + counts.leased


async def test_a_broker_on_a_cluster_carries_on_through_a_master_kill(
    redis_cluster: RedisCluster, start_broker: StartBroker
) -> None:
    # Given a broker waiting for a replica on every storage write
    redis_cluster.flush()
    broker = start_broker(f"{redis_cluster.url}?wait_replicas=1&wait_timeout_ms=1000")
    ledger = Ledger()
    async with Client(broker.address) as shared, Client(broker.address) as other:
        await Admin(shared).create_topic(TOPIC)
        # and a producer and a consumer sharing a client, and a second consumer
        async with (
            Producer(shared, TOPIC) as producer,
            Consumer(shared, TOPIC, lease_ms=LEASE_MS) as first,
            Consumer(other, TOPIC, lease_ms=LEASE_MS) as second,
        ):
            consumers = [
                asyncio.create_task(consume(first, "first", ledger)),
                asyncio.create_task(consume(second, "second", ledger)),
            ]
            try:
                await produce(producer, ledger, BEFORE)
                # When a master is killed with SIGKILL while they run
                victim = redis_cluster.masters()[0]
                victim.kill()
                load = asyncio.create_task(produce(producer, ledger, BEFORE))
                # and its replica takes over, and it comes back as a replica
                await asyncio.to_thread(redis_cluster.wait_healthy)
                victim.start()
                await asyncio.to_thread(redis_cluster.wait_healthy)
                healthy_at = time.monotonic()
                await load
                # Then delivery resumes within a bound once every master has a replica
                await produce(producer, ledger, AFTER)
                while ledger.last_delivery < healthy_at:
                    assert time.monotonic() - healthy_at < RESUME_S, "delivery did not resume"
                    await asyncio.sleep(0.05)  # polling the run's progress
                # And every acknowledged produce is delivered, and in the end the
                # topic is empty (an ack refused as unavailable may have been
                # applied: its message is then gone, not delivered again)
                deadline = time.monotonic() + DRAIN_S
                while not (set(ledger.produced) <= set(ledger.delivered)) or await left(shared):
                    missing = len(set(ledger.produced) - set(ledger.delivered))
                    assert time.monotonic() < deadline, f"{missing} never delivered"
                    await asyncio.sleep(0.05)  # polling the run's progress
            finally:
                for task in consumers:
                    task.cancel()
                await asyncio.gather(*consumers, return_exceptions=True)
        # none early, none held by two consumers at once but after a lease lost
        # with the master (leases do not wait for replicas), which its first
        # holder's ack found (refused)
        assert ledger.early == []
        assert ledger.doubly_held == []
        assert [w for id, first, w in ledger.overlaps if (id, first) not in ledger.refused] == []
        assert redis_cluster.node(victim.port).role() == "slave"
    await asyncio.to_thread(redis_cluster.wait_healthy)
