"""A client process that makes refused calls of 4 MiB each, then prints their
status codes: ``python -m tests.broker.refused_calls ADDRESS KIND COUNT``.

Apart from the broker under test so that what the test process holds is the
broker's alone.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Awaitable, Callable

import grpc

from dejaq.core.wire.batches import encode_messages
from dejaq.core.wire.frames import MAX_FRAME_BYTES
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc

TOPIC = "kept"  # a topic the broker has
SIZE = 4 << 20

Stub = pb_grpc.TimelineStub


async def produce_once(stub: Stub, request: pb.ProduceRequest) -> grpc.StatusCode:
    call = stub.Produce()
    await call.write(request)
    await call.done_writing()
    return await call.code()


async def produce_to_missing_topic(stub: Stub) -> grpc.StatusCode:
    batch = encode_messages([0], [b"x" * SIZE], ["m"])
    return await produce_once(stub, pb.ProduceRequest(topic="missing", batch=batch))


async def produce_malformed_batch(stub: Stub) -> grpc.StatusCode:
    return await produce_once(stub, pb.ProduceRequest(topic=TOPIC, batch=os.urandom(SIZE)))


async def unary_to_missing_topic(stub: Stub) -> grpc.StatusCode:
    request = pb.AckRequest(topic="missing", id="m", version=1, consumer_id="c" * SIZE)
    try:
        await stub.Ack(request)
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def settle_without_versions(stub: Stub) -> grpc.StatusCode:
    call = stub.Consume()
    await call.write(pb.ConsumeRequest(hello=pb.Hello(topic=TOPIC, credits=1)))
    ids = [f"{i:0>1000}" for i in range(SIZE // 1000)]
    await call.write(pb.ConsumeRequest(settle=pb.Settle(ids=ids)))
    try:
        while await call.read() is not grpc.aio.EOF:
            pass  # the welcome
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return await call.code()


KINDS: dict[str, Callable[[Stub], Awaitable[grpc.StatusCode]]] = {
    "produce-not-found": produce_to_missing_topic,
    "produce-malformed": produce_malformed_batch,
    "unary-not-found": unary_to_missing_topic,
    "settle-invalid": settle_without_versions,
}


async def main(address: str, kind: str, count: int) -> None:
    options = [("grpc.max_send_message_length", MAX_FRAME_BYTES)]
    async with grpc.aio.insecure_channel(address, options=options) as channel:
        stub = Stub(channel)
        for _ in range(count):
            print((await KINDS[kind](stub)).name, flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
