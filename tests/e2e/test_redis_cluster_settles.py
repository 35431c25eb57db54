"""A broker process on ``redis+cluster://?wait_replicas=1`` and a consumer that
confirms every ack, each ack its own frame: the frames that arrive while the
broker's storage call runs go to storage together, so the masters see a WAIT a
group (per master), not one an ack — counted in their ``INFO commandstats``."""

from __future__ import annotations

import asyncio
import time

import pytest

from dejaq.driver import Admin, Client, Consumer, Delivery, Producer
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import StartBroker
from tests.e2e.support import now_ms
from tests.redis_cluster import RedisCluster

pytestmark = pytest.mark.timeout(120)
TOPIC = "confirmed"
COUNT = 300
DELIVERY_TIMEOUT_S = 60.0


def wait_calls(cluster: RedisCluster) -> int:
    """WAIT commands the masters have run since they started."""
    total = 0
    for node in cluster.masters():
        with node.client() as client:
            stats = client.info("commandstats")
        total += int(stats.get("cmdstat_wait", {}).get("calls", 0))
    return total


async def test_confirmed_acks_wait_for_replicas_a_group_at_a_time(
    redis_cluster: RedisCluster, start_broker: StartBroker
) -> None:
    # Given a broker waiting for a replica on every ack, and COUNT delivered messages
    redis_cluster.flush()
    broker = start_broker(f"{redis_cluster.url}?wait_replicas=1&wait_timeout_ms=1000")
    async with Client(broker.address) as client:
        await Admin(client).create_topic(TOPIC)
        async with Producer(client, TOPIC) as producer:
            due = now_ms()
            batch = [Outgoing(b"x", due, id=f"m{i:04d}") for i in range(COUNT)]
            await producer.send_batch(batch)
        async with Consumer(client, TOPIC, credits=COUNT) as consumer:
            held: list[Delivery] = []
            deadline = time.monotonic() + DELIVERY_TIMEOUT_S
            async for delivery in consumer:
                held.append(delivery)
                assert time.monotonic() < deadline, f"{len(held)} of {COUNT} delivered"
                if len(held) == COUNT:
                    break
            before = wait_calls(redis_cluster)
            # When each is acked with confirmation, one after another without
            # waiting for the previous answer: one frame an ack
            acks = []
            for delivery in held:
                acks.append(asyncio.create_task(delivery.ack(confirm=True)))
                await asyncio.sleep(0)  # the next ack in a later turn: a frame of its own
            await asyncio.gather(*acks)
            waits = wait_calls(redis_cluster) - before
    # Then every ack was confirmed with far fewer WAITs than acks: a WAIT a
    # group a master (three masters), not one an ack (here ~50 for 300)
    assert waits <= COUNT // 2, f"{waits} WAITs for {COUNT} confirmed acks"
    async with Client(broker.address) as client:
        counts = (await Admin(client).describe_topic(TOPIC)).counts
    assert counts.waiting + counts.due + counts.leased == 0
