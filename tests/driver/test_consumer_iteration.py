"""``async for d in consumer``: the consumer is its own async iterator, a
delivery ready in the buffer is handed out without the loop running, every
``YIELD_EVERY``-th ready one lets the loop run once, and a closed consumer ends
the loop. Settles linger 50 ms by default."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Coroutine
from typing import Any

import pytest

from dejaq.core.clock import now_ms
from dejaq.driver import Admin, Consumer, Delivery, Producer, embedded
from dejaq.driver.consumer import YIELD_EVERY
from dejaq.driver.producer import Outgoing
from dejaq.driver.settle import SettleBatcher

pytestmark = pytest.mark.timeout(60)
WITHIN_S = 10.0


async def buffered(consumer: Consumer, count: int) -> None:
    """Wait until ``count`` deliveries are in the consumer's buffer."""
    deadline = time.monotonic() + WITHIN_S
    while len(consumer._buffer) < count:
        assert time.monotonic() < deadline, "the deliveries never reached the buffer"
        await asyncio.sleep(0.01)


def step(awaitable: Coroutine[Any, Any, Delivery]) -> Delivery | None:
    """Run one step of ``awaitable``: its result if it finished without
    suspending, None if it suspended (then it is closed)."""
    try:
        awaitable.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    awaitable.close()
    return None


async def test_a_ready_delivery_is_handed_out_without_the_loop_and_every_64th_yields() -> None:
    async with embedded("memory://") as client:
        await Admin(client).create_topic("jobs")
        # Given a consumer with more than YIELD_EVERY due deliveries in its buffer
        count = YIELD_EVERY + 8
        async with Producer(client, "jobs") as producer:
            await producer.send_batch([Outgoing(b"x", 0, f"m{n}") for n in range(count)])
        async with Consumer(client, "jobs") as consumer:
            await buffered(consumer, count)
            # When the application iterates it, then the consumer is its own iterator
            it = aiter(consumer)
            assert it is consumer
            # and each ready delivery comes without a suspension, until the
            # YIELD_EVERY-th, which lets the loop run once first
            taken = [step(anext(it)) for _ in range(YIELD_EVERY - 1)]  # type: ignore[arg-type]
            assert all(isinstance(d, Delivery) for d in taken)
            assert step(anext(it)) is None  # type: ignore[arg-type]
            d = await anext(it)
            assert isinstance(d, Delivery)
            for each in [*taken, d]:
                await each.ack()  # type: ignore[union-attr]


async def test_a_held_delivery_due_while_the_loop_was_busy_is_handed_out_without_the_loop() -> None:
    async with embedded("memory://") as client:
        await Admin(client).create_topic("jobs")
        async with Consumer(client, "jobs") as consumer:
            # Given a consumer holding a message the broker sent ahead of its time
            due = now_ms() + 300
            async with Producer(client, "jobs") as producer:
                await producer.send_batch([Outgoing(b"x", due, "later")])
            deadline = time.monotonic() + WITHIN_S
            while consumer.held < 1:
                assert time.monotonic() < deadline, "the message was never held"
                await asyncio.sleep(0.01)
            # when the application is busy past its time, so the hold's timer has not run
            time.sleep(max(0, due - now_ms() + 20) / 1000)  # noqa: ASYNC251 (the point: busy)
            # then the next delivery comes at once, without a turn of the loop, and not early
            d = step(anext(consumer))  # type: ignore[arg-type]
            assert isinstance(d, Delivery)
            assert d.id == "later"
            assert now_ms() >= d.timestamp_ms == due
            await d.ack()


async def test_an_async_for_starts_the_consumer_and_a_close_ends_it() -> None:
    async with embedded("memory://") as client:
        await Admin(client).create_topic("jobs")
        async with Producer(client, "jobs") as producer:
            await producer.send_batch([Outgoing(b"x", 0, f"m{n}") for n in range(3)])
        # Given a consumer not started yet
        consumer = Consumer(client, "jobs")
        got: list[str] = []
        # When the application loops over it and closes it after the last message
        async for d in consumer:
            got.append(d.id)
            await d.ack()
            if len(got) == 3:
                await consumer.close()
        # then it got each message once, and the loop ended with the close
        assert sorted(got) == ["m0", "m1", "m2"]
        assert [d async for d in consumer] == []


async def test_settles_linger_50_ms_by_default() -> None:
    async with embedded("memory://") as client:
        # Given a consumer and a settle batcher made with their defaults, then a
        # settle waits at most 50 ms for others to share its frame
        assert Consumer(client, "jobs")._settler.linger_s == 0.05
        assert SettleBatcher(lambda req: True).linger_s == 0.05
