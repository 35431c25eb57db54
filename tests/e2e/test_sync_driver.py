"""The synchronous driver wrapper, against a real broker."""

from __future__ import annotations

import pytest

from dejaq.core.errors import NotFound
from dejaq.core.model import InsertStatus
from dejaq.driver.sync import SyncClient

from .broker_process import BrokerProcess


def test_sync_produce_consume_ack(memory_broker: BrokerProcess, topic_name: str) -> None:
    # Given a topic and a synchronous client
    with SyncClient(memory_broker.address) as client:
        client.admin.create_topic(topic_name)
        producer = client.producer(topic_name)
        # When a message is produced for 200 ms from now and consumed
        result = producer.send(b"hello", delay_ms=200, id="s-1")
        producer.close()
        consumer = client.consumer(topic_name, credits=10)
        delivery = consumer.receive(timeout=10)
        delivery.ack()
        consumer.close()
        # Then it arrived on time, once, and is gone after the ack
        assert result.status == InsertStatus.ACCEPTED
        assert (delivery.id, delivery.payload, delivery.deliveries) == ("s-1", b"hello", 1)
        assert delivery.received_at_ms >= delivery.timestamp_ms
        with pytest.raises(NotFound):
            client.admin.get(topic_name, "s-1")


def test_sync_receive_times_out_when_nothing_is_due(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    with SyncClient(memory_broker.address) as client:
        client.admin.create_topic(topic_name)
        consumer = client.consumer(topic_name)
        with pytest.raises(TimeoutError):
            consumer.receive(timeout=0.2)
        consumer.close()
