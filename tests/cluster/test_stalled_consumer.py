"""A consumer that stops taking deliveries, alone on its broker, does not starve
its buckets: after about one lease they go to the other consumers, and come back
when it takes deliveries again. (That a consumer without credit but with nothing
due keeps its buckets is shown in-process: tests/broker/test_stall_inprocess.py.)"""

from __future__ import annotations

from dejaq.core.model import TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing
from tests.cluster.support import Cluster, Recorder, covers, now_ms, status, wait_converged
from tests.e2e.support import produce

LEASE_MS = 1_000
MESSAGES = 60


async def test_a_stalled_consumers_buckets_go_to_the_others(cluster: Cluster) -> None:
    # Given three brokers, a topic, a consumer on broker 0 that takes one delivery
    # and then no more, and a consumer on broker 1 that acks everything
    brokers = cluster.start(3)
    addresses = [b.address for b in brokers]
    topic = "stalls"
    async with Client(addresses[0]) as client:
        await Admin(client).create_topic(topic, TopicSettings(buckets=16, lease_ms=LEASE_MS))
    stuck_client = Client([addresses[0]])
    stuck = await Consumer(stuck_client, topic, consumer_id="stuck", credits=1).start()
    worker = Recorder()
    await worker.add("worker", [addresses[1]], topic)
    try:
        await wait_converged(addresses, topic, consumers=2)
        # When messages of every bucket are due
        ids = [f"m{i}" for i in range(MESSAGES)]
        async with Client(addresses[2]) as client:
            await produce(client, topic, [Outgoing(b"x", now_ms(), id=i) for i in ids])
        # Then all of them reach the worker, the stuck consumer's share included
        # (its own held message once its lease ran out)
        await worker.wait_for(ids, timeout_s=20)
        assert worker.ack_failures == []
        # and the cluster counts only the worker, owning every bucket
        s = await status(addresses[2])
        assert covers(s, topic, consumers=1)
        (only,) = next(t for t in s.topics if t.name == topic).consumers
        assert only.id == "worker"

        # When the stuck consumer takes its delivery (its credit goes back)
        assert len(stuck.ready()) == 1
        # Then it counts again: the buckets are shared between the two
        await wait_converged(addresses, topic, consumers=2)
    finally:
        await stuck.close()
        await stuck_client.close()
        await worker.close()
