"""A webhook topic honours the limits per key: one customer's endpoint that
takes its time (or answers 429 past a few requests at once) gets no more than
its key's concurrency in flight, while the other keys' requests flow."""

from __future__ import annotations

import asyncio

import pytest

from dejaq.core.model import TopicSettings, Webhook
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import BrokerProcess, StartBroker
from tests.e2e.support import now_ms, produce, wait_until
from tests.e2e.webhook_sink import Hit, Reply, Sink


@pytest.fixture
def hook_broker(start_broker: StartBroker) -> BrokerProcess:
    return start_broker("memory://", DEJAQ_WEBHOOK_ALLOW="127.0.0.1")


async def test_one_keys_requests_in_flight_stay_within_its_concurrency(
    hook_broker: BrokerProcess, sink: Sink, topic_name: str
) -> None:
    # Given an endpoint taking 50 ms an answer, a webhook of concurrency 10, and
    # the customer "acme" limited to 2 messages held at once
    in_flight: dict[str, int] = {}
    most: dict[str, int] = {}

    async def answer(hit: Hit, before: int) -> Reply:
        key = "acme" if hit.id.startswith("acme-") else "others"
        in_flight[key] = in_flight.get(key, 0) + 1
        most[key] = max(most.get(key, 0), in_flight[key])
        await asyncio.sleep(0.05)  # the endpoint's own slowness, not a wait for a condition
        in_flight[key] -= 1
        return 200, {}

    sink.answer = answer
    async with Client(hook_broker.address) as client:
        admin = Admin(client)
        await admin.create_topic(
            topic_name, TopicSettings(webhook=Webhook(sink.url, concurrency=10))
        )
        await admin.set_key_limit(topic_name, "acme", concurrency=2)
        # When 20 of acme's messages and 20 of other customers' fall due at once
        t = now_ms()
        acme = [Outgoing(b"a", t, id=f"acme-{i}", key="acme") for i in range(20)]
        others = [Outgoing(b"o", t, id=f"other{i % 4}-{i}", key=f"o{i % 4}") for i in range(20)]
        await produce(client, topic_name, acme + others)
        await wait_until(lambda: len(sink.ok_ids()) == 40, 30, "all answered")
    # Then acme never had more than 2 requests in flight, and did have 2, while
    # the others together had more at once
    assert most["acme"] == 2
    assert most["others"] > 2
