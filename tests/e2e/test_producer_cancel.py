"""A send the caller cancels (``asyncio.wait_for`` timing out) leaves the
producer whole: the frames already handed to the stream are answered, close()
waits for them, returns, and ends the stream.

Cancelling the wait used to cancel the frame's own answer: close() then
awaited that cancelled answer and raised ``CancelledError`` in a task nobody
had cancelled, before ending the stream, which the broker kept open.
"""

from __future__ import annotations

import asyncio
import urllib.request

import pytest

from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from tests.e2e.broker_process import StartBroker
from tests.e2e.support import counts, create_topic, wait_until
from tests.servers import free_port

FAR = 4_102_444_800_000  # 2100-01-01
MESSAGES = 50_000  # 500 frames: far from answered when the caller gives up
GIVE_UP_S = 0.05
CLOSE_S = 30.0  # a close that hangs fails here, not at the run's timeout


def producer_streams(port: int) -> float:
    """The broker's open Produce streams, from its /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("dejaq_producer_streams "):
                return float(line.split()[1])
    raise AssertionError("no dejaq_producer_streams on /metrics")


async def test_close_after_a_send_cancelled_by_wait_for_returns_and_ends_the_stream(
    start_broker: StartBroker, topic_name: str
) -> None:
    port = free_port()
    broker = start_broker("memory://", DEJAQ_METRICS=f"127.0.0.1:{port}")
    async with Client(broker.address) as client:
        topic = await create_topic(client, topic_name)
        producer = Producer(client, topic, max_batch=100)
        batch = [Outgoing(b"x" * 100, FAR, f"m{i}") for i in range(MESSAGES)]
        # Given a send_batch that the caller's wait_for gives up on mid-way
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(producer.send_batch(batch), GIVE_UP_S)
        # When the producer is closed, in this task (which nobody cancelled)
        await asyncio.wait_for(producer.close(), CLOSE_S)
        # Then close returns, and the broker sees the stream end
        await wait_until(lambda: producer_streams(port) == 0, what="the stream to end")
        # with what went out stored in whole frames, and the producer usable again
        waiting = (await counts(client, topic))[0]
        assert waiting % 100 == 0 and waiting < MESSAGES
        async with Producer(client, topic) as again:
            results = await again.send_batch(batch[:200])
        assert all(r.accepted or r.status.name == "DUPLICATE" for r in results)
