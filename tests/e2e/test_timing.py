"""When messages arrive: never before their timestamp, on a wake-up, in order.

These brokers re-scan storage only every 60 s, so a message can only arrive on
time if the dispatcher slept until exactly its due time or a produce woke it.
How late they arrive is a figure for ``benchmarks/``, not a test assertion.
"""

from __future__ import annotations

import asyncio
import random

import pytest

from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import STORAGES, BrokerProcess, Brokers
from tests.e2e.support import (
    EMPTY,
    ack_all,
    consuming,
    counts,
    create_topic,
    now_ms,
    produce,
    produce_one,
)


@pytest.fixture(params=STORAGES)
def broker(request: pytest.FixtureRequest, brokers: Brokers) -> BrokerProcess:
    """A broker per backend whose re-scan cannot mask a late or missing wake-up."""
    return brokers.get(request.param, DEJAQ_RESCAN_MS="60000")


async def test_2000_messages_over_3_seconds_arrive_once_each_and_never_early(
    client: Client, topic_name: str
) -> None:
    # Given a consumer and 2,000 messages due uniformly over 2.5 s, starting in 0.5 s
    topic = await create_topic(client, topic_name)
    n, start, spread = 2_000, now_ms() + 500, 2_500
    messages = [Outgoing(b"%d" % i, start + i * spread // n, id=f"m{i:04d}") for i in range(n)]
    async with consuming(client, topic, credits=500) as inbox:
        await produce(client, topic, messages)
        # When every one of them is received and acked
        acks = []
        deliveries = []
        for _ in range(n):
            d = await inbox.next(timeout_s=10)
            deliveries.append(d)
            acks.append(asyncio.ensure_future(d.ack()))
        await asyncio.gather(*acks)
    # Then each arrived exactly once, none before its timestamp
    assert sorted(d.id for d in deliveries) == [m.id for m in messages]
    assert {d.deliveries for d in deliveries} == {1}
    early = [
        (d.id, d.timestamp_ms, d.received_at_ms)
        for d in deliveries
        if d.received_at_ms < d.timestamp_ms
    ]
    assert early == []
    due = {m.id: m.timestamp_ms for m in messages}
    assert all(d.timestamp_ms == due[d.id] for d in deliveries)
    # and in timestamp order
    stamps = [d.timestamp_ms for d in deliveries]
    assert stamps == sorted(stamps)
    # and nothing is left to redeliver
    assert await counts(client, topic) == EMPTY


async def test_a_message_due_sooner_wakes_the_sleeping_dispatcher(
    client: Client, topic_name: str
) -> None:
    # Given a consumer and a message due in 10 s that the dispatcher sleeps for
    topic = await create_topic(client, topic_name)
    async with consuming(client, topic) as inbox:
        later_at = now_ms() + 10_000
        later = await produce_one(client, topic, later_at, b"later")
        # When a message due in 300 ms is produced after it
        sooner_at = now_ms() + 300
        sooner = await produce_one(client, topic, sooner_at, b"sooner")
        # Then the sooner one arrives first, not early, and before the later one is due
        d = await inbox.next(timeout_s=5)
        assert d.id == sooner != later
        assert sooner_at <= d.received_at_ms < later_at
        await d.ack(confirm=True)


async def test_a_single_consumer_with_one_credit_receives_in_timestamp_order(
    client: Client, topic_name: str
) -> None:
    # Given 50 overdue messages and 50 due within the next second, produced shuffled
    topic = await create_topic(client, topic_name)
    t = now_ms()
    overdue = [Outgoing(b"", t - 1_000 + 7 * i, id=f"overdue-{i:02d}") for i in range(50)]
    upcoming = [Outgoing(b"", t + 300 + 11 * i, id=f"upcoming-{i:02d}") for i in range(50)]
    rng = random.Random(7)
    rng.shuffle(overdue)
    rng.shuffle(upcoming)
    await produce(client, topic, overdue)
    async with consuming(client, topic, credits=1) as inbox:
        await produce(client, topic, upcoming)
        # When a consumer with a window of one takes them all
        got = await inbox.take(100, timeout_s=10)
        await ack_all(got)
    # Then they came in timestamp order, none early
    stamps = [d.timestamp_ms for d in got]
    assert stamps == sorted(stamps)
    assert [d.id for d in got[:50]] == sorted(m.id for m in overdue)
    assert [d.id for d in got[50:]] == sorted(m.id for m in upcoming)
    assert all(d.received_at_ms >= d.timestamp_ms for d in got)
