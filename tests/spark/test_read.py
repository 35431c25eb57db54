"""Reading a topic back with spark.read.format("dejaq"): exactly its messages,
in every state, counted as ``dejaq topic describe`` counts them."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from dejaq.core.errors import DejaqError
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing, Producer
from tests.e2e.broker_process import BrokerProcess
from tests.spark.conftest import create_topic
from tests.spark.support import counts, now_ms

DEADLINE_S = 30.0


async def _lease_and_vanish(address: str, topic: str, n: int) -> None:
    """A consumer takes ``n`` deliveries and vanishes without a goodbye: the
    broker keeps their leases until they expire."""
    client = Client(address)
    consumer = await Consumer(client, topic, credits=n).start()
    got = 0
    async for _ in consumer:
        got += 1
        if got == n:
            break
    await client.close()  # the stream breaks under the consumer
    with contextlib.suppress(DejaqError):
        await consumer.close()


async def _produce(address: str, topic: str, messages: list[Outgoing]) -> None:
    async with Client(address) as client, Producer(client, topic) as producer:
        results = await producer.send_batch(messages)
        assert all(r.accepted for r in results)


def _wait_for_counts(address: str, topic: str, want: tuple[int, int, int, int]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while (got := counts(address, topic)) != want:
        assert time.monotonic() < deadline, f"counts {got}, want {want}"
        time.sleep(0.05)  # polling the broker's counts under a deadline


def test_the_read_path_returns_the_topics_messages_and_states(
    spark: Any, broker: BrokerProcess, topic_name: str
) -> None:
    # given 30 dead, 20 leased, 15 due and 50 waiting messages
    topic = create_topic(broker.address, topic_name, lease_ms=600_000, buckets=16)
    now = now_ms()
    expired = [
        Outgoing(b"old", now - 2000, f"dead-{i}", expires_at_ms=now - 1000) for i in range(30)
    ]
    due = [Outgoing(f"due {i}".encode(), now - 1000, f"leased-{i}") for i in range(20)]
    asyncio.run(_produce(broker.address, topic, expired + due))
    asyncio.run(_lease_and_vanish(broker.address, topic, 20))
    later = [Outgoing(b"now", now - 500, f"due-{i}") for i in range(15)]
    later += [Outgoing(f"w{i}".encode(), now + 3_600_000 + i, f"wait-{i}") for i in range(50)]
    asyncio.run(_produce(broker.address, topic, later))
    _wait_for_counts(broker.address, topic, (50, 15, 20, 30))

    # when the topic is read with Spark, 3 partitions of buckets
    df = (
        spark.read.format("dejaq")
        .option("broker", broker.address)
        .option("topic", topic)
        .option("partitions", "3")
        .option("pageSize", "7")
        .load()
    )
    rows = df.collect()

    # then it is exactly the topic's messages, counted as describe counts them
    assert df.rdd.getNumPartitions() == 3
    ids = sorted(r["id"] for r in rows)
    assert ids == sorted(m.id for m in expired + due + later)
    by_state = {r["state"]: r["count"] for r in df.groupBy("state").count().collect()}
    waiting, due_now, leased, dead = counts(broker.address, topic)
    assert by_state == {"waiting": waiting, "due": due_now, "leased": leased, "dead": dead}
    row = {r["id"]: r for r in rows}
    assert row["wait-7"]["timestamp_ms"] == now + 3_600_007
    assert bytes(row["wait-7"]["payload"]) == b"w7" and row["wait-7"]["version"] == 1
    assert row["leased-3"]["deliveries"] == 1 and row["leased-3"]["version"] == 2
    assert row["leased-3"]["timestamp_ms"] > now + 500_000

    # and a states filter without payloads reads only those
    dead_only = (
        spark.read.format("dejaq")
        .option("broker", broker.address)
        .option("topic", topic)
        .option("states", "dead,leased")
        .option("payloads", "false")
        .load()
    )
    assert dead_only.filter("payload is null").count() == 50
