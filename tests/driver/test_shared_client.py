"""A producer and a consumer sharing one ``Client``: when one of them fails over
(its stream answered UNAVAILABLE, as a broker does while its storage fails over),
the client drops its channel, which cancels the other's stream too. Both must
open new streams and carry on; neither may wait for good on a cancelled one."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from dejaq.driver import Admin, Consumer, Producer, embedded
from dejaq.driver.client import first_write
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc

pytestmark = pytest.mark.timeout(60)
WITHIN_S = 20.0  # far beyond a reconnect on loopback; a stall waits for good


async def test_a_failover_by_one_stream_leaves_the_other_working() -> None:
    # Given a producer and a consumer on one client, both streams open
    async with embedded("memory://") as client:
        await Admin(client).create_topic("jobs")
        async with Producer(client, "jobs") as producer, Consumer(client, "jobs") as consumer:
            await producer.send(b"before", id="before")
            first = await asyncio.wait_for(anext(aiter(consumer)), WITHIN_S)
            await first.ack()
            # When the client fails over (what a stream does on UNAVAILABLE),
            # dropping the channel both streams were on
            await client.failover()
            # Then a message produced afterwards is acknowledged and delivered
            await asyncio.wait_for(producer.send(b"after", id="after"), WITHIN_S)
            second = await asyncio.wait_for(anext(aiter(consumer)), WITHIN_S)
            assert (second.id, second.payload) == ("after", b"after")
            await second.ack(confirm=True)


async def test_streams_cancelled_together_do_not_keep_cancelling_each_other() -> None:
    # Given two consumers and a producer on one client
    async with embedded("memory://") as client:
        await Admin(client).create_topic("a")
        await Admin(client).create_topic("b")
        async with (
            Producer(client, "a") as pa,
            Producer(client, "b") as pb,
            Consumer(client, "a") as ca,
            Consumer(client, "b") as cb,
        ):
            # When the channel is dropped under all of them at once
            await client.failover()
            # Then each goes on, over one channel that stays put
            deadline = time.monotonic() + WITHIN_S
            await asyncio.wait_for(asyncio.gather(pa.send(b"1"), pb.send(b"2")), WITHIN_S)
            got = await asyncio.wait_for(
                asyncio.gather(anext(aiter(ca)), anext(aiter(cb))), WITHIN_S
            )
            assert sorted(d.payload for d in got) == [b"1", b"2"]
            for d in got:
                await d.ack(confirm=True)
            assert time.monotonic() < deadline


async def test_iterating_while_the_consumer_reconnects_waits_for_the_reconnect() -> None:
    # Given a consumer whose stream was dropped, its reconnect not yet done
    async with embedded("memory://") as client:
        await Admin(client).create_topic("jobs")
        async with Producer(client, "jobs") as producer, Consumer(client, "jobs") as consumer:
            for round_ in range(10):
                await client.failover()
                # When a new iteration starts at once (a fresh ``async for``)
                await producer.send(b"x", id=f"m{round_}")
                got = await asyncio.wait_for(anext(aiter(consumer)), WITHIN_S)
                # Then it gets the message over the reconnected stream, and does
                # not open a second stream under the same consumer id
                assert got.id == f"m{round_}"
                await got.ack(confirm=True)


@pytest.mark.parametrize("turns", [1, 2, 4])
async def test_a_first_write_ends_when_the_channel_closes_before_the_stream_started(
    turns: int,
) -> None:
    # Given a stream's first write under way on a fresh channel
    async with embedded("memory://") as client:
        channel = grpc.aio.insecure_channel(client.address)
        call = pb_grpc.TimelineStub(channel).Produce()
        writing = asyncio.ensure_future(first_write(call, pb.ProduceRequest(topic="jobs")))
        for _ in range(turns):
            await asyncio.sleep(0)
        # When the channel closes under it (another stream's failover)
        await channel.close()
        # Then the write ends, as a write to an ended call does (a plain
        # grpc.aio write waits for good here)
        with pytest.raises(asyncio.InvalidStateError):
            await asyncio.wait_for(writing, WITHIN_S)
