"""Raw gRPC calls for the bad-input stories: what the driver would never send."""

from __future__ import annotations

from collections.abc import Awaitable

import grpc
import pytest

from dejaq.core.model import InsertStatus
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc

Code = grpc.StatusCode
Stub = pb_grpc.TimelineStub
INVALID = Code.INVALID_ARGUMENT
ACCEPTED, REJECTED = int(InsertStatus.ACCEPTED), int(InsertStatus.REJECTED)
YEAR_10000_MS = 253_402_300_800_000


async def status_of(call: Awaitable[object]) -> grpc.StatusCode:
    """The status code a call fails with."""
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    return info.value.code()


async def produce_raw(stub: Stub, topic: str, batch: bytes) -> pb.ProduceResponse:
    """One Produce frame on a stream of its own; raises AioRpcError if the stream fails."""
    call = stub.Produce()
    await call.write(pb.ProduceRequest(topic=topic, batch=batch))
    response = await call.read()
    if response is grpc.aio.EOF:
        await call  # raises the status the stream ended with
        raise AssertionError("the produce stream ended without an answer")
    await call.done_writing()
    assert await call.read() is grpc.aio.EOF
    return response


async def consume_raw(stub: Stub, *frames: pb.ConsumeRequest) -> list[pb.ConsumeResponse]:
    """Send ``frames`` on one Consume stream, then read until it ends; raises AioRpcError
    with the status it ends with."""
    call = stub.Consume()
    got: list[pb.ConsumeResponse] = []
    for frame in frames:
        await call.write(frame)
    while (response := await call.read()) is not grpc.aio.EOF:
        got.append(response)
    return got


def hello(topic: str, **fields: object) -> pb.ConsumeRequest:
    return pb.ConsumeRequest(hello=pb.Hello(topic=topic, **fields))  # type: ignore[arg-type]


async def topic_names(client: Client) -> set[str]:
    return {t.name for t in await Admin(client).list_topics()}
