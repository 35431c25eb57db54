"""kill -9 of a broker while it waits on a webhook request: the message stays
leased to it until the lease (longer than the request's timeout) runs out,
then another broker posts it again. Redelivered, never lost, never early."""

from __future__ import annotations

from dejaq.core.model import TopicSettings, Webhook
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.cluster.support import Cluster, now_ms, status, wait_converged
from tests.e2e.support import EMPTY, counts, produce, wait_until
from tests.e2e.webhook_sink import Hit, Reply, Sink

MESSAGES = 30
TIMEOUT_MS = 2500  # the request's; the lease outlasts two of them (poster.lease_for)
DEADLINE_S = 60  # a hang guard, not a measure


async def test_a_broker_killed_mid_request_leaves_the_message_to_another(
    cluster: Cluster,
) -> None:
    # Given three brokers posting one webhook topic to a sink that leaves its
    # first request hanging and answers every other one
    sink = await Sink().start()
    victim_ids: list[str] = []

    async def answer(hit: Hit, before: int) -> Reply:
        if not victim_ids:
            victim_ids.append(hit.id)
            return await sink.hang()
        return 200, {}

    sink.answer = answer
    brokers = cluster.start(3, DEJAQ_WEBHOOK_ALLOW="127.0.0.1")
    a = [b.address for b in brokers]
    topic = "hooked"
    try:
        async with Client(a[0]) as client:
            hook = Webhook(sink.url, timeout_ms=TIMEOUT_MS, backoff_ms=50)
            settings = TopicSettings(buckets=12, lease_ms=1000, webhook=hook)
            await Admin(client).create_topic(topic, settings)
            await wait_converged(a, topic, consumers=3)
            # When messages fall due and the broker holding the hanging request is killed
            base = now_ms() + 300
            sent = [Outgoing(b"p", base + 20 * i, id=f"w{i}") for i in range(MESSAGES)]
            await produce(client, topic, sent)
            await wait_until(lambda: bool(victim_ids), 15, "the hanging request")
            (victim_id,) = victim_ids
            held = await Admin(client).get(topic, victim_id)
            owner = held.message.lease_owner
            (t,) = [t for t in (await status(a[0])).topics if t.name == topic]
            (address,) = [c.broker for c in t.consumers if c.id == owner]
            victim = brokers[a.index(address)]
            victim.kill()
        survivor = next(x for x in a if x != address)
        async with Client(survivor) as client:
            # Then every message is answered 200, the victim's by another broker
            await wait_until(
                lambda: sink.ok_ids() == {m.id for m in sent}, DEADLINE_S, "all delivered"
            )
            again = [h for h in sink.of(victim_id) if h.delivery > 1]
            assert again, "the message held by the killed broker was not posted again"
            first = sink.of(victim_id)[0]
            assert again[0].arrived_ms >= first.arrived_ms + TIMEOUT_MS
            # And none was posted before its time, and all were acked
            assert all(h.arrived_ms >= h.due_ms for h in sink.hits)

            async def empty() -> bool:
                return await counts(client, topic) == EMPTY

            await wait_until(empty, 15, "all acked")
    finally:
        await sink.stop()
