"""keep_alive racing an extend in flight: the next settle quotes the extend's version.

The broker is replaced by holding the frames the batcher sends and answering
them by hand, so the race is played deterministically: the extend's answer is
held back while the block ends and the application acks.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from dejaq.core.errors import StaleVersion
from dejaq.driver.delivery import Delivery
from dejaq.driver.settle import SettleBatcher
from dejaq.proto import dejaq_pb2 as pb


class Wire:
    """Frames the batcher sends, kept to be answered by hand."""

    def __init__(self) -> None:
        self.frames: list[pb.Settle] = []

    def send(self, req: pb.ConsumeRequest) -> bool:
        if req.WhichOneof("frame") == "settle":
            self.frames.append(req.settle)
        return True

    def of(self, kind: int) -> list[pb.Settle]:
        return [f for f in self.frames if f.kind == kind]

    async def wait_for(self, kind: int, timeout_s: float = 5.0) -> pb.Settle:
        deadline = time.monotonic() + timeout_s
        while not self.of(kind):
            assert time.monotonic() < deadline, "no frame of that kind was sent"
            await asyncio.sleep(0.005)
        return self.of(kind)[0]


def delivery(settler: SettleBatcher, version: int, lease_ms: int) -> Delivery:
    return Delivery("m-1", 0, b"p", version, 1, 0, 0, settler, lease_ms)


async def settle_turns() -> None:
    """Let queued settles leave (a few event-loop turns and the linger)."""
    await asyncio.sleep(0.05)


async def test_an_ack_after_keep_alive_waits_for_the_extend_in_flight() -> None:
    # Given a delivery at version 5 kept alive, whose extend is sent but not answered
    wire = Wire()
    settler = SettleBatcher(wire.send, linger_ms=1)
    d = delivery(settler, 5, lease_ms=40)
    async with d.keep_alive():
        extend = await wire.wait_for(pb.Settle.EXTEND)
    assert list(extend.versions) == [5]
    # When the block has ended (its renewer cancelled) and the application acks
    ack = asyncio.create_task(d.ack())
    await settle_turns()
    # Then the ack does not leave with the old version
    assert wire.of(pb.Settle.ACK) == []
    assert not ack.done()
    # When the extend's answer arrives with the new version
    settler.answered(pb.SettleResult(token=extend.token, versions=[6]))
    await ack
    await settle_turns()
    # Then the ack quotes it
    (sent,) = wire.of(pb.Settle.ACK)
    assert list(sent.versions) == [6]
    assert d.version == 6


async def test_a_nack_and_an_extend_also_wait_for_the_extend_in_flight() -> None:
    wire = Wire()
    settler = SettleBatcher(wire.send, linger_ms=1)
    d = delivery(settler, 9, lease_ms=1000)
    # Given an extend whose caller was cancelled before the answer came
    first = asyncio.create_task(d.extend(1000))
    frame = await wire.wait_for(pb.Settle.EXTEND)
    first.cancel()
    # When the application nacks
    nack = asyncio.create_task(d.nack(250))
    await settle_turns()
    assert wire.of(pb.Settle.NACK) == []
    settler.answered(pb.SettleResult(token=frame.token, versions=[10]))
    await nack
    await settle_turns()
    # Then the nack quotes the version the cancelled extend produced
    (sent,) = wire.of(pb.Settle.NACK)
    assert (list(sent.versions), sent.ms) == ([10], 250)


async def test_a_refused_extend_does_not_block_the_next_settle() -> None:
    wire = Wire()
    settler = SettleBatcher(wire.send, linger_ms=1)
    d = delivery(settler, 3, lease_ms=1000)
    extend = asyncio.create_task(d.extend(1000))
    frame = await wire.wait_for(pb.Settle.EXTEND)
    ack = asyncio.create_task(d.ack())
    # The extend is refused: its caller gets the error, the ack goes on with version 3
    refusal = pb.Rejection(index=0, code=10, reason="stale", kind="StaleVersion")
    settler.answered(pb.SettleResult(token=frame.token, versions=[0], rejections=[refusal]))
    with pytest.raises(StaleVersion):
        await extend
    await ack
    await settle_turns()
    (sent,) = wire.of(pb.Settle.ACK)
    assert list(sent.versions) == [3]
