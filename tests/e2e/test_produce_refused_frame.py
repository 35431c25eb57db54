"""A Produce stream refused at one frame stores nothing of the frames after it
(found by tests/fuzz: they were stored while the stream ended with the error,
so a producer was told NOT_FOUND about messages that would be delivered)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from dejaq.driver.client import Client
from dejaq.proto import dejaq_pb2 as pb
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import counts, create_topic, frame, produce_sync


@pytest.mark.parametrize("refusal", ["unknown topic", "malformed batch"])
async def test_frames_after_a_refused_frame_are_not_stored(
    memory_broker: BrokerProcess, topic_name: str, refusal: str
) -> None:
    # Given a topic, and a frame refused as a whole
    refused = (
        frame(f"{topic_name}-missing", "x")
        if refusal == "unknown topic"
        else pb.ProduceRequest(topic=topic_name, batch=b"\xff" * 12)
    )
    async with Client(memory_broker.address) as client:
        await create_topic(client, topic_name)
        # When a good frame, the refused one and more good frames go out at once
        more = [frame(topic_name, f"b{i}") for i in range(20)]
        code, answers = await asyncio.to_thread(
            produce_sync, memory_broker.address, [frame(topic_name, "a"), refused, *more]
        )
        # Then the stream ends with the refusal, the frame before it is stored
        # (its answer may be dropped by gRPC as the stream ends), and nothing
        # after it was stored
        assert code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT)
        assert answers in ([], [([0], ["a"])])
        assert await counts(client, topic_name) == (1, 0, 0, 0)
