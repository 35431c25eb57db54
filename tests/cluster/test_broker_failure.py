"""kill -9 of a broker mid-stream: its consumers and producer fail over, what
died with it comes back when its leases expire, its buckets go to the others
when its etcd lease expires, nothing is lost."""

from __future__ import annotations

import asyncio
import time

from dejaq.core.buckets import bucket_of
from dejaq.core.model import InsertStatus, TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer, ProduceResult
from tests.cluster.support import (
    TTL_S,
    Cluster,
    Recorder,
    covers,
    holder_overlaps,
    now_ms,
    status,
    wait_converged,
)
from tests.e2e.support import ChildConsumer, wait_until

FRAMES = 30
FRAME = 10
LEASE_MS = 2000  # short, so what the dead broker's consumers held comes back soon
HELD = 5  # messages the consumer process dying with the broker holds unacked
REBALANCE_DEADLINE_S = 30  # a hang guard, not a measure: the time taken is printed


async def test_a_killed_broker_loses_nothing_and_its_buckets_move(cluster: Cluster) -> None:
    # Given three brokers, one consumer attached to each (the others as failover),
    brokers = cluster.start(3)
    a = [b.address for b in brokers]
    victim = brokers[2]
    topic = "failover"
    async with Client(a[0]) as admin:
        await Admin(admin).create_topic(topic, TopicSettings(buckets=24))
    recorder = Recorder()
    child: asyncio.Task[ChildConsumer] | None = None
    try:
        for i in range(3):
            await recorder.add(f"c{i}", a[i:] + a[:i], topic, lease_ms=LEASE_MS)
        # ... and, on broker 2's machine, a consumer process that takes messages and
        # never acks (it will die with the broker)
        child = asyncio.create_task(ChildConsumer.start(a[2], topic, HELD, LEASE_MS))
        await wait_converged(a, topic, consumers=4)
        (before,) = [t for t in (await status(a[0])).topics if t.name == topic]
        victims_buckets = {
            b
            for c in before.consumers
            if c.broker == victim.address
            for first, last in c.buckets
            for b in range(first, last + 1)
        }

        # When a producer attached to broker 2 streams messages due soon, and
        # broker 2 (with that consumer) is killed mid-stream
        results: list[ProduceResult] = []
        killed_at_ms = unanswered = 0
        killed = time.monotonic()
        async with Client([a[2], a[0], a[1]]) as client, Producer(client, topic) as producer:
            sends: list[asyncio.Future[list[ProduceResult]]] = []
            for f in range(FRAMES):
                batch = [Outgoing(b"x", now_ms() + 100, id=f"k{f}-{i}") for i in range(FRAME)]
                # Frames go out without waiting for their answers, so some are in
                # flight when the broker dies and must be resent to another one.
                sends.append(asyncio.ensure_future(producer.send_batch(batch)))
                if f == FRAMES // 3:
                    held = await child  # it holds its messages by now
                if f == FRAMES // 3 + 5:  # mid-burst
                    unanswered = sum(not send.done() for send in sends)
                    killed_at_ms, killed = now_ms(), time.monotonic()
                    victim.kill()
                    await held.kill()
                await asyncio.sleep(0.001 if f % 10 else 0.03)  # pacing: bursts of ten
            for batch_results in await asyncio.gather(*sends):
                results.extend(batch_results)
        produced = {r.id for r in results}

        # Then the producer got an answer for every message: stored once (a resent
        # frame is answered DUPLICATE for what the dead broker had stored)
        assert len(produced) == FRAMES * FRAME
        assert {r.status for r in results} <= {InsertStatus.ACCEPTED, InsertStatus.DUPLICATE}

        # ... the survivors drop the dead broker once its etcd lease expires, and
        # the buckets of its consumers go to the consumers that are left
        survivors = a[:2]

        async def rebalanced() -> bool:
            for address in survivors:
                s = await status(address)
                if {b.address for b in s.brokers} != set(survivors) or not covers(s, topic, 3):
                    return False
                if any(c.broker == victim.address for t in s.topics for c in t.consumers):
                    return False
            return True

        await wait_until(rebalanced, REBALANCE_DEADLINE_S, "the dead broker's buckets to move")
        rebalance_s = time.monotonic() - killed
        await wait_converged(survivors, topic, consumers=3)

        # ... every message is delivered at least once
        await recorder.wait_for(produced, timeout_s=20)
    finally:
        await recorder.close()
        if child is not None and child.done() and not child.exception():
            await child.result().kill()
    by_id = recorder.by_id()
    assert set(by_id) == produced
    # ... what the dead consumer held came back only when its lease ran out
    for mid, lease_until in held.lease_until.items():
        again = by_id[mid][0]
        assert again.deliveries >= 2 and again.received_ms >= lease_until, (mid, again)
    # ... redeliveries only for what the dead broker's consumers held when it died
    # (their buckets): the dead process's messages, and any whose ack was lost with it
    redelivered = {mid for mid, ds in by_id.items() if ds[0].deliveries > 1 or len(ds) > 1}
    assert {bucket_of(mid, 24) for mid in redelivered} <= victims_buckets
    # ... and a surviving consumer saw a message twice only when its first copy came
    # through the dead broker and the ack was lost with it
    twice = {mid for mid, ds in by_id.items() if len(ds) > 1}
    for mid in twice:
        first = by_id[mid][0]
        assert first.consumer == "c2" and not first.acked, by_id[mid]
    # ... never two holders at once
    assert not holder_overlaps(recorder.seen)
    # ... and the consumer attached to the dead broker carried on through another
    assert any(s.consumer == "c2" and s.received_ms > killed_at_ms for s in recorder.seen)
    answered_duplicate = sum(1 for r in results if r.status == InsertStatus.DUPLICATE)
    print(
        f"\nrebalanced {rebalance_s:.2f} s after kill -9 (etcd lease ttl {TTL_S} s);"
        f" {len(redelivered)} of {len(produced)} messages redelivered"
        f" ({len(held.lease_until)} seen by the consumer that died with the broker,"
        f" {len(twice)} seen twice by surviving consumers);"
        f" {unanswered} produce frames unanswered at the kill went to another broker,"
        f" {answered_duplicate} messages answered DUPLICATE"
    )
