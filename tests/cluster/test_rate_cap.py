"""A topic's rate cap holds for the whole cluster, not per broker: three brokers
with a consumer each drain a burst at the cap together, and a cap set through one
broker reaches the others."""

from __future__ import annotations

from dejaq.core.model import InsertStatus, TopicSettings
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from tests.cluster.support import Cluster, Recorder, holder_overlaps, now_ms, wait_converged

RATE = 200.0
MESSAGES = 600  # 3 s at the cap; 1 s if each broker took the whole cap


async def test_a_burst_drains_at_the_cap_across_three_brokers(cluster: Cluster) -> None:
    # Given three brokers with a consumer each, and a topic whose cap is set
    # through one broker after its consumers joined (so it travels to the others)
    brokers = cluster.start(3)
    addresses = [b.address for b in brokers]
    topic = "campaign"
    async with Client(addresses[0]) as admin:
        await Admin(admin).create_topic(topic, TopicSettings(buckets=24))
    recorder = Recorder()
    for i, address in enumerate(addresses):
        await recorder.add(f"c{i}", [address], topic, credits=1000)
    await wait_converged(addresses, topic, consumers=3)
    async with Client(addresses[1]) as admin:
        capped = await Admin(admin).set_max_rate(topic, RATE)
    assert capped.settings.max_rate == RATE

    # When a burst becomes due at one millisecond
    due = now_ms() + 1000
    batch = [Outgoing(b"x", due, id=f"m{i}") for i in range(MESSAGES)]
    async with Client(addresses[2]) as client, Producer(client, topic) as producer:
        results = await producer.send_batch(batch)
    assert {r.status for r in results} == {InsertStatus.ACCEPTED}

    # Then the three brokers together deliver it at the cap, each message once,
    # none early, one holder at a time
    try:
        await recorder.wait_for([m.id for m in batch], timeout_s=30)
    finally:
        await recorder.close()
    assert len(recorder.seen) == MESSAGES
    assert not holder_overlaps(recorder.seen)
    assert min(s.lateness_ms for s in recorder.seen) >= 0
    assert {s.consumer for s in recorder.seen} == {"c0", "c1", "c2"}
    received = sorted(s.received_ms for s in recorder.seen)
    drain_s = (received[-1] - due) / 1000
    print(f"\n{MESSAGES} due at one ms, cap {RATE:g}/s over 3 brokers: drained in {drain_s:.2f} s")
    assert drain_s >= 0.8 * MESSAGES / RATE  # a per-broker cap would take a third of it
    assert drain_s <= 1.6 * MESSAGES / RATE
