"""Produce in-process: a large frame is inserted in chunks, and reads as one."""

from __future__ import annotations

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.produce import produce
from dejaq.core.model import InsertStatus
from dejaq.core.wire.batches import decode_results, encode_messages
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import ManualClock, make_broker

pytestmark = pytest.mark.timeout(30)


async def test_a_frame_larger_than_a_chunk_answers_as_one_and_the_first_of_an_id_wins() -> None:
    clock = ManualClock()
    broker = await make_broker(clock)
    await control.create_topic(broker, pb.CreateTopicRequest(name="t"))
    chunk = broker.storage.insert_chunk = 250  # as Redis asks (memory takes a frame whole)
    # Given a frame of 2.4 chunks where one id comes back in a later chunk
    n = chunk * 2 + chunk // 2
    ids = [f"m{i}" for i in range(n)]
    ids[chunk + 7] = "m3"
    stamps = [clock.now + 1_000 + i for i in range(n)]
    frame = encode_messages(stamps, [b"x"] * n, ids)
    # When it is produced
    answer = await produce(broker, pb.ProduceRequest(topic="t", batch=frame))
    status, answered_ids = decode_results(answer.results)
    # Then every message has its status, in order, the repeat a duplicate
    assert answered_ids == ids
    expected = [InsertStatus.ACCEPTED] * n
    expected[chunk + 7] = InsertStatus.DUPLICATE
    assert status == [int(s) for s in expected]
    assert (await broker.storage.counts("t", clock.now)).waiting == n - 1
    assert (await broker.storage.get("t", "m3")).timestamp == stamps[3]
    await broker.storage.close()
