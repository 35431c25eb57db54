"""Resource bounds in-process: produce frame caps, topic payload vs frame, open
streams, and a consumer that stops reading its stream."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Callable

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.consume import consume_stream
from dejaq.broker.api.produce import produce, produce_stream
from dejaq.broker.context import BrokerContext
from dejaq.core.errors import DejaqError, InvalidArgument, ResourceExhausted
from dejaq.core.wire.batches import decode_deliveries, encode_messages
from dejaq.core.wire.frames import frame_bytes
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import START_MS, ManualClock, make_broker

pytestmark = pytest.mark.timeout(30)


async def _broker(**limits: int) -> BrokerContext:
    broker = await make_broker(ManualClock())
    await control.create_topic(broker, pb.CreateTopicRequest(name="t"))
    broker.config = dataclasses.replace(broker.config, **limits)
    broker.streams.limit = broker.config.max_streams
    return broker


def _frame(n: int, payload: bytes = b"x") -> pb.ProduceRequest:
    batch = encode_messages([START_MS] * n, [payload] * n, [f"m{i}" for i in range(n)])
    return pb.ProduceRequest(topic="t", batch=batch)


async def _stored(broker: BrokerContext) -> int:
    c = await broker.storage.counts("t", 0)
    return c.waiting + c.due + c.leased + c.dead


async def test_a_produce_frame_over_the_message_cap_is_refused_whole() -> None:
    broker = await _broker(max_produce_messages=100)
    await produce(broker, _frame(100))  # at the cap: taken
    with pytest.raises(InvalidArgument, match="at most 100 messages"):
        await produce(broker, _frame(101))
    assert await _stored(broker) == 100


async def test_a_produce_frame_over_the_byte_cap_is_refused_whole() -> None:
    broker = await _broker(max_produce_bytes=64 << 10)
    with pytest.raises(InvalidArgument, match=f"at most {64 << 10} bytes"):
        await produce(broker, _frame(20, b"y" * 4000))
    assert await _stored(broker) == 0


async def test_a_topic_max_payload_must_fit_a_produce_frame() -> None:
    broker = await _broker(max_produce_bytes=1 << 20)
    room = (1 << 20) - frame_bytes(1, 0)
    settings = pb.TopicSettings(max_payload_bytes=room)
    await control.create_topic(broker, pb.CreateTopicRequest(name="fits", settings=settings))
    settings = pb.TopicSettings(max_payload_bytes=room + 1)
    with pytest.raises(InvalidArgument, match=f"between 1 and {room} bytes"):
        await control.create_topic(broker, pb.CreateTopicRequest(name="no", settings=settings))


async def _forever() -> AsyncIterator[pb.ProduceRequest]:
    await asyncio.Event().wait()
    yield pb.ProduceRequest()


async def test_streams_past_the_limit_are_refused_and_a_closed_one_frees_its_slot() -> None:
    broker = await _broker(max_streams=1)
    first = produce_stream(broker, _forever())
    task = asyncio.ensure_future(anext(first))
    await asyncio.sleep(0.01)
    assert broker.streams.open == 1
    with pytest.raises(ResourceExhausted, match="at most 1 streams"):
        await anext(produce_stream(broker, _forever()))
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert broker.streams.open == 0


async def test_a_consumer_that_stops_reading_is_cut_off_and_its_deliveries_go_back() -> None:
    broker = await _broker(max_outbox_frames=8)
    await produce(broker, _frame(10))
    cut: list[DejaqError] = []
    was_cut = asyncio.Event()

    async def cut_off(exc: DejaqError) -> None:
        cut.append(exc)
        was_cut.set()

    async def requests() -> AsyncIterator[pb.ConsumeRequest]:
        # A consumer that takes 5 deliveries, asks for 5 more, then only sends
        # settles (each answered).
        yield pb.ConsumeRequest(hello=pb.Hello(topic="t", consumer_id="slow", credits=5))
        for _ in range(20):
            await asyncio.sleep(0)
        yield pb.ConsumeRequest(credits=5)
        for n in range(50):
            await asyncio.sleep(0)
            settle = pb.Settle(kind=pb.Settle.ACK, ids=["nope"], versions=[1], token=n)
            yield pb.ConsumeRequest(settle=settle)
        await asyncio.Event().wait()

    stream = consume_stream(broker, requests(), cut_off)
    # Given a consumer that read its welcome and its first 5 deliveries
    assert (await anext(stream)).WhichOneof("frame") == "welcome"
    assert len(decode_deliveries((await anext(stream)).deliveries)[0]) == 5
    # When it reads nothing more while its settles keep being answered
    await asyncio.wait_for(was_cut.wait(), 5)
    # Then it is cut off with a clear status, out of the dispatcher at once,
    assert cut and isinstance(cut[0], ResourceExhausted)
    assert "not reading its stream" in str(cut[0])
    assert broker.dispatchers["t"].receivers == []
    # its next read raises the same, and the 5 deliveries it never got are due
    # again (the 5 it read stay leased to it: it may still be working on them).
    with pytest.raises(ResourceExhausted):
        await anext(stream)
    for _ in range(50):
        await asyncio.sleep(0)
    counts = await broker.storage.counts("t", broker.clock.now_ms())
    assert (counts.due, counts.leased) == (5, 5)
    assert broker.streams.open == 0


class _Silent:
    """A consumer stream that never reads: the first delivery frame goes to the
    transport, whose write then waits for the consumer for good, and the others
    wait in the broker. Keeps what cut it off, if anything did."""

    def __init__(self, broker: BrokerContext, name: str, credits: int) -> None:
        self.name = name
        self.cut: list[DejaqError] = []
        hello = pb.Hello(topic="t", consumer_id=name, credits=credits, lease_ms=60_000)
        self.stream = consume_stream(broker, self._requests(hello), self._cut_off)
        self.writing: asyncio.Future[pb.ConsumeResponse] | None = None

    async def _requests(self, hello: pb.Hello) -> AsyncIterator[pb.ConsumeRequest]:
        yield pb.ConsumeRequest(hello=hello)
        await asyncio.Event().wait()

    async def _cut_off(self, exc: DejaqError) -> None:
        self.cut.append(exc)

    async def join(self) -> None:
        assert (await anext(self.stream)).WhichOneof("frame") == "welcome"
        self.writing = asyncio.ensure_future(anext(self.stream))


async def _until(condition: Callable[[], bool]) -> None:
    """Let the dispatcher and the streams run until ``condition`` holds."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def test_consumers_that_never_read_are_held_under_the_bound_greediest_cut_first() -> None:
    broker = await _broker(max_held_bytes=2 << 20, max_frame_messages=10)
    broker.held.limit = 2 << 20
    payload = b"p" * 4000
    held = 2 * len(payload)  # a delivery waiting: in its frame, and kept to hand back
    stamp = broker.clock.now_ms()

    async def due_now(prefix: str, n: int) -> None:
        ids = [f"{prefix}{i}" for i in range(n)]
        batch = encode_messages([stamp] * n, [payload] * n, ids)
        await produce(broker, pb.ProduceRequest(topic="t", batch=batch))

    async def joins(consumer: _Silent, n: int) -> None:
        """``consumer`` connects as ``n`` messages of 4 KB fall due for it."""
        await due_now(consumer.name, n)
        before = broker.held.total
        await consumer.join()
        # all but the frame of 10 being written wait in the broker (or it is cut)
        await _until(lambda: broker.held.total >= before + (n - 10) * held or bool(greedy.cut))

    # Given two consumers that never read, sent 150 and 80 deliveries of 4 KB:
    # under the broker's 2 MiB together
    greedy, modest, third = (
        _Silent(broker, n, c) for n, c in (("greedy", 150), ("modest", 80), ("third", 100))
    )
    await joins(greedy, 150)
    await joins(modest, 80)
    assert not greedy.cut and not modest.cut
    # When a third is sent 100 more, over the bound
    await joins(third, 100)
    await _until(lambda: bool(greedy.cut) and broker.held.total >= (70 + 90) * held)
    # Then the greediest is cut off, with a clear status; the others stay, what
    # they hold under the bound
    assert isinstance(greedy.cut[0], ResourceExhausted)
    assert "--max-held-bytes" in str(greedy.cut[0])
    assert not modest.cut and not third.cut
    assert [r.consumer_id for r in broker.dispatchers["t"].receivers] == ["modest", "third"]
    assert 160 * held <= broker.held.total <= broker.held.limit

    # and the 140 deliveries it never got are due again: nothing lost, nothing
    # handed to another consumer that has no credit for it
    async def counts() -> tuple[int, int]:
        c = await broker.storage.counts("t", broker.clock.now_ms())
        return c.due, c.leased

    for _ in range(100):
        if await counts() == (140, 190):
            break
        await asyncio.sleep(0)
    assert await counts() == (140, 190)
