"""Bytes that are not a request of the method's type get INVALID_ARGUMENT (found
by tests/fuzz: gRPC's own parsing answered UNKNOWN), and the broker serves on."""

from __future__ import annotations

import grpc
import pytest

from dejaq.proto import dejaq_pb2 as pb
from tests.e2e.broker_process import BrokerProcess
from tests.e2e.support import assert_serves

NOT_PROTOBUF = b"\xff\xff\xff"  # a field tag whose varint never ends
TIMELINE = pb.DESCRIPTOR.services_by_name["Timeline"]


@pytest.mark.parametrize("method", [m.name for m in TIMELINE.methods])
async def test_undecodable_request_bytes_are_invalid_arguments(
    memory_broker: BrokerProcess, method: str
) -> None:
    path = f"/{TIMELINE.full_name}/{method}"
    async with grpc.aio.insecure_channel(memory_broker.address) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            if TIMELINE.methods_by_name[method].client_streaming:
                call = channel.stream_stream(path)(iter([NOT_PROTOBUF]))
                async for _ in call:
                    pass
            else:
                await channel.unary_unary(path)(NOT_PROTOBUF)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.value.details()
    assert "not a" in (refused.value.details() or "")
    await assert_serves(memory_broker.address)
