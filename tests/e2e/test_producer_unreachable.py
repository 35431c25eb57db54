"""A producer that reaches no broker says so at once; one that reaches a later
broker of its list goes on there."""

from __future__ import annotations

import pytest

from dejaq.core.errors import BrokerUnavailable
from dejaq.core.model import InsertStatus
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import create_topic, now_ms


@pytest.mark.timeout(20)  # the retry timeout below is not what ends the wait
async def test_no_broker_reachable_fails_the_send_naming_address_and_cause(
    refused_address: str,
) -> None:
    # Given a producer whose only broker is not running
    async with Client(refused_address) as client:
        producer = Producer(client, "reminders", retry_timeout_s=60)

        # When it sends, twice
        for _ in range(2):
            with pytest.raises(BrokerUnavailable) as raised:
                await producer.send_batch([Outgoing(b"x", now_ms() + 1000)])

            # Then each send fails with the address and the refusal
            assert refused_address in str(raised.value)
            assert "Connection refused" in str(raised.value)
        await producer.close()


async def test_a_broker_not_running_is_passed_over_for_the_next_of_the_list(
    refused_address: str, memory_broker: BrokerProcess, topic_name: str
) -> None:
    # Given a producer whose first broker is not running and second is
    async with Client(memory_broker.address) as admin_client:
        topic = await create_topic(admin_client, topic_name)
    async with Client([refused_address, memory_broker.address]) as client:
        async with Producer(client, topic) as producer:
            # When it sends
            (result,) = await producer.send_batch([Outgoing(b"x", now_ms() + 60_000, "m1")])

    # Then the second broker stored it
    assert result.status == InsertStatus.ACCEPTED
