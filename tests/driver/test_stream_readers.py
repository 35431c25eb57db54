"""A stream reader that fails in a way none of its paths expects (an answer or
a delivery it cannot take): what waits on the stream is told at once, rather
than waiting for good on a stream nobody reads."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dejaq.driver import Admin, BrokerUnavailable, Consumer, Producer, embedded
from dejaq.driver import consumer as consumer_module
from dejaq.driver import producer as producer_module
from dejaq.driver.producer import Outgoing

pytestmark = pytest.mark.timeout(60)
WITHIN_S = 10.0
FAR_MS = 4_102_444_800_000  # 2100-01-01


async def test_a_reader_that_fails_fails_the_frames_in_flight_and_the_next_send_works(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with embedded("memory://") as client:
        await Admin(client).create_topic("jobs")
        async with Producer(client, "jobs") as producer:
            await producer.send_batch([Outgoing(b"x", FAR_MS, "first")])
            # Given a reader that cannot take the next answer it reads
            taken = producer_module._results

            def unreadable(*args: Any) -> Any:
                monkeypatch.setattr(producer_module, "_results", taken)
                raise ValueError("an answer that does not fit its frame")

            monkeypatch.setattr(producer_module, "_results", unreadable)
            # When a frame is sent, then it fails at once, naming the cause
            with pytest.raises(BrokerUnavailable, match="does not fit its frame"):
                await asyncio.wait_for(
                    producer.send_batch([Outgoing(b"x", FAR_MS, "second")]), WITHIN_S
                )
            # and the next send goes out on a new stream and is answered
            again = await asyncio.wait_for(
                producer.send_batch([Outgoing(b"x", FAR_MS, "second")]), WITHIN_S
            )
            assert [r.id for r in again] == ["second"]


async def test_a_consumer_whose_reader_fails_ends_with_the_cause(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with embedded("memory://") as client:
        await Admin(client).create_topic("jobs")
        async with Producer(client, "jobs") as producer, Consumer(client, "jobs") as consumer:
            # Given a reader that cannot take the next deliveries it reads
            def undecodable(*args: Any) -> Any:
                raise ValueError("a delivery frame that does not decode")

            monkeypatch.setattr(consumer_module, "decode_delivery_columns", undecodable)
            await producer.send_batch([Outgoing(b"x", 0, "due")])
            # When the consumer waits for it, then it is told why the stream ended
            with pytest.raises(BrokerUnavailable, match="does not decode"):
                await asyncio.wait_for(consumer.receive(), WITHIN_S)
