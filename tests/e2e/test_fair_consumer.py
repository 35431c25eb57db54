"""A consumer working through a backlog of one key's deliveries still gets
another key's delivery soon after it is due: the broker shares each pass among
the keys, and the consumer's ready deliveries go round the keys
(docs/keys.md)."""

from __future__ import annotations

import asyncio

import pytest

from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing, Producer
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import create_topic, now_ms

pytestmark = pytest.mark.timeout(60)

CAMPAIGN = 6_000
WINDOW = 2_048


async def test_a_reminder_is_not_queued_behind_a_window_of_a_campaign(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    async with Client(memory_broker.address) as client:
        # given a campaign of one key due now, more than three consumer windows of it
        topic = await create_topic(client, topic_name, buckets=4)
        due = now_ms()
        async with Producer(client, topic) as producer:
            campaign = [Outgoing(b"sale", due, f"c{i:05}", key="sale") for i in range(CAMPAIGN)]
            await producer.send_batch(campaign)
            async with Consumer(client, topic, credits=WINDOW) as consumer:
                # when the consumer has taken its first delivery, a reminder of another key
                # is produced, due at once, while the loop keeps taking and acking
                position = None
                taken = 0
                sending: asyncio.Task[object] | None = None
                async for d in consumer:
                    taken += 1
                    if sending is None:
                        reminder = Outgoing(b"remind", now_ms(), "r1", key="user-7")
                        sending = asyncio.create_task(producer.send_batch([reminder]))
                    if d.key == "user-7":
                        position = taken
                    await d.ack()
                    if taken == CAMPAIGN + 1:
                        break
                assert sending is not None and (await sending)
        # then it is handed out with the next frames, long before the campaign is
        # half done (taken in due order it would come after all 6,000)
        assert position is not None
        assert position < CAMPAIGN // 2, position
