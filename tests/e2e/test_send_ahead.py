"""Sending ahead through the real driver and broker: the broker sends a consumer
that holds (``Consumer(hold_ms=...)``) its messages before they are due, the
driver gives each to the application only when the broker's clock reaches its
timestamp, and a consumer that leaves with messages held lets none of them
reach another consumer early."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import BrokerProcess, StartBroker
from tests.e2e.support import consuming, create_topic, now_ms, produce
from tests.e2e.test_cli import DEJAQ

pytestmark = pytest.mark.timeout(60)
AHEAD_MS = 1000  # far ahead, so a test can look while messages are held
DUE_IN_MS = 700
N = 20


@pytest.fixture
def ahead_broker(start_broker: StartBroker) -> BrokerProcess:
    return start_broker("memory://", DEJAQ_SEND_AHEAD_MS=str(AHEAD_MS))


@pytest.fixture
async def client(ahead_broker: BrokerProcess) -> AsyncIterator[Client]:
    async with Client(ahead_broker.address, timeout_s=10) as c:
        yield c


async def held_by(consumer: Consumer, n: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while consumer.held < n:
        assert time.monotonic() < deadline, f"{consumer.held} of {n} held"
        await asyncio.sleep(0.01)


async def test_messages_sent_ahead_reach_the_application_when_due_never_before(
    client: Client, topic_name: str
) -> None:
    # Given a consumer that holds up to a second, and messages due in 0.7 s
    topic = await create_topic(client, topic_name)
    async with consuming(client, topic, hold_ms=AHEAD_MS) as inbox:
        due = now_ms() + DUE_IN_MS
        await produce(client, topic, [Outgoing(b"x", due + i) for i in range(N)])
        # Then the broker sends them at once and the driver holds them
        await held_by(inbox.consumer, N)
        assert inbox.received == []
        # and hands each out at its millisecond, not before
        got = await inbox.take(N)
        seen = now_ms()
        assert all(d.received_at_ms >= d.timestamp_ms for d in got)
        assert seen >= due + N - 1
        assert [d.timestamp_ms for d in got] == sorted(d.timestamp_ms for d in got)
        assert inbox.consumer.held == 0
        for d in got:
            await d.ack()


async def test_a_consumer_that_leaves_holding_messages_lets_none_go_early(
    client: Client, topic_name: str
) -> None:
    # Given a consumer holding messages due in 0.7 s, and another that holds nothing
    topic = await create_topic(client, topic_name)
    leaving = await Consumer(client, topic, consumer_id="leaving", hold_ms=AHEAD_MS).start()
    due = now_ms() + DUE_IN_MS
    await produce(client, topic, [Outgoing(b"x", due) for _ in range(N)])
    await held_by(leaving, N)
    async with consuming(client, topic, consumer_id="staying", hold_ms=0) as staying:
        # When the first leaves cleanly
        await leaving.close()
        # Then it left only once they were due (its Goodbye released them)
        assert now_ms() >= due
        # and the other gets every one, none before its time
        got = await staying.take(N)
        assert all(d.received_at_ms >= d.timestamp_ms for d in got)
        for d in got:
            await d.ack()


async def test_dejaq_consume_prints_each_message_sent_ahead_when_it_is_due(
    ahead_broker: BrokerProcess, client: Client, topic_name: str
) -> None:
    # Given messages due in 0.7 s, on a broker that sends up to a second ahead
    topic = await create_topic(client, topic_name)
    due = now_ms() + DUE_IN_MS
    await produce(client, topic, [Outgoing(b"x", due + i) for i in range(N)])
    # When `dejaq consume --hold 1s` takes them
    done = await asyncio.create_subprocess_exec(
        *DEJAQ,
        *("consume", topic, "--count", str(N), "--hold", "1s"),
        *("--broker", ahead_broker.address),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(done.communicate(), 30)
    # Then it prints each one when due, never before
    assert done.returncode == 0, err
    got = [json.loads(line) for line in out.decode().splitlines()]
    assert len(got) == N
    assert all(d["received_at_ms"] >= d["timestamp_ms"] >= due for d in got)
