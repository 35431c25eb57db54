"""The synchronous driver wrapper, against a real broker."""

from __future__ import annotations

import threading

import pytest

from dejaq.core.errors import AlreadyExists, NotFound
from dejaq.core.model import InsertStatus, TopicSettings
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


def test_sync_close_lets_another_thread_finish_its_delivery(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    # Given a thread iterating a consumer, working on a message
    with SyncClient(memory_broker.address) as client:
        client.admin.create_topic(topic_name)
        producer = client.producer(topic_name)
        producer.send(b"work", id="w-1")
        producer.close()
        consumer = client.consumer(topic_name, lease_ms=60_000)
        working, finish = threading.Event(), threading.Event()
        acked: list[str] = []

        def loop() -> None:
            for d in consumer:
                working.set()
                finish.wait(30)
                d.ack(confirm=True)
                acked.append(d.id)

        worker = threading.Thread(target=loop)
        worker.start()
        assert working.wait(10)
        # When another thread closes the consumer
        closer = threading.Thread(target=consumer.close)
        closer.start()
        closer.join(0.3)
        # Then close waits for the delivery being processed
        assert closer.is_alive()
        # When the worker acks it and asks for the next
        finish.set()
        closer.join(10)
        worker.join(10)
        # Then its ack was accepted, the loop ended, and the message is gone
        assert not closer.is_alive() and not worker.is_alive()
        assert acked == ["w-1"]
        with pytest.raises(NotFound):
            client.admin.get(topic_name, "w-1")


def test_the_admin_calls_are_the_sync_client_s_own(
    memory_broker: BrokerProcess, topic_name: str
) -> None:
    with SyncClient(memory_broker.address) as client:
        # Given a topic made, then made again alike, by a set-up that runs twice
        made = client.create_topic(topic_name, TopicSettings(lease_ms=45_000), exist_ok=True)
        again = client.create_topic(topic_name, TopicSettings(lease_ms=45_000), exist_ok=True)
        assert again == made
        with pytest.raises(AlreadyExists, match="lease_ms 45000"):
            client.create_topic(topic_name, TopicSettings(lease_ms=10_000), exist_ok=True)
        # When it is listed, set, described and deleted with the client's own calls
        assert topic_name in [t.name for t in client.list_topics()]
        client.set_max_rate(topic_name, 50.0)
        client.set_delivery(topic_name, max_deliveries=3)
        info = client.describe_topic(topic_name)
        # Then each call did its part
        assert (info.topic.settings.max_rate, info.topic.settings.max_deliveries) == (50.0, 3)
        assert (info.topic.settings.lease_ms, info.counts.waiting) == (45_000, 0)
        client.delete_topic(topic_name)
        with pytest.raises(NotFound):
            client.describe_topic(topic_name)


def test_sync_key_and_headers_round_trip(memory_broker: BrokerProcess, topic_name: str) -> None:
    # Given a message sent by the synchronous producer with a key and headers
    with SyncClient(memory_broker.address) as client:
        client.admin.create_topic(topic_name)
        producer = client.producer(topic_name)
        producer.send(b"hi", id="s-k", key="tenant-1", headers={"schema": "v2"})
        producer.close()
        # When it is received, then the delivery and the admin get both carry them
        consumer = client.consumer(topic_name, credits=10)
        delivery = consumer.receive(timeout=10)
        assert (delivery.key, delivery.headers) == ("tenant-1", {"schema": "v2"})
        info = client.admin.get(topic_name, "s-k")
        assert (info.key, info.headers) == ("tenant-1", {"schema": "v2"})
        delivery.ack(confirm=True)
        consumer.close()
