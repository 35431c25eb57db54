"""Produce in-process with on_duplicate: the frame's mode reaches storage, the
answer says what became of each message, a mode the wire lacks is refused."""

from __future__ import annotations

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.produce import produce
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import Counts, InsertStatus
from dejaq.core.wire.batches import decode_results, encode_messages
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins.base import LeaseRequest

from .inprocess import ManualClock, make_broker

pytestmark = pytest.mark.timeout(30)


async def test_a_replace_frame_answers_per_message_and_leaves_a_leased_one() -> None:
    clock = ManualClock()
    broker = await make_broker(clock)
    await control.create_topic(broker, pb.CreateTopicRequest(name="t"))
    # given "due" leased by a consumer and "later" waiting
    first = encode_messages([clock.now, clock.now + 60_000], [b"a", b"b"], ["due", "later"])
    await produce(broker, pb.ProduceRequest(topic="t", batch=first))
    await broker.storage.lease(LeaseRequest.of("t", None, clock.now, 10, 30_000, "c1"))
    # when both and a new id are produced again with replace
    again = encode_messages([clock.now + 5_000] * 3, [b"x", b"y", b"z"], ["due", "later", "new"])
    request = pb.ProduceRequest(topic="t", batch=again, on_duplicate=pb.ON_DUPLICATE_REPLACE)
    status, _ = decode_results((await produce(broker, request)).results)
    # then the leased one is left, the waiting one replaced, the new one stored
    assert status == [InsertStatus.LEASED, InsertStatus.REPLACED, InsertStatus.ACCEPTED]
    later = await broker.storage.get("t", "later")
    assert (later.timestamp, later.payload, later.version) == (clock.now + 5_000, b"y", 2)
    assert (await broker.storage.get("t", "due")).payload == b"a"
    await broker.storage.close()


async def test_an_unknown_on_duplicate_is_refused_and_stores_nothing() -> None:
    clock = ManualClock()
    broker = await make_broker(clock)
    await control.create_topic(broker, pb.CreateTopicRequest(name="t"))
    frame = encode_messages([clock.now], [b"x"], ["m"])
    with pytest.raises(InvalidArgument, match="on_duplicate 7"):
        await produce(broker, pb.ProduceRequest(topic="t", batch=frame, on_duplicate=7))  # type: ignore[arg-type]
    assert await broker.storage.counts("t", clock.now) == Counts()
    await broker.storage.close()
