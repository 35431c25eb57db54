"""A bare gRPC relay with no broker logic: the priority scenario's second floor.

A message sent one at a time goes producer process -> stream -> broker process
-> stream -> consumer process. This relay keeps that shape and drops everything
dejaq does between (storage, codecs, ranking, leases, acks), so a figure read
beside the priority latency tells gRPC-in-Python's share on this machine from
dejaq's. Not dejaq code and not a product figure; each side is its own OS
process, driven over a pipe like the other load processes (``workers.py``).

- relay: ``grpc.aio`` on 127.0.0.1, generic handlers, bytes in and out (no
  serializers). ``Send`` (stream-stream): each frame goes at once to the next
  connected ``Receive`` stream (round robin) and is answered with one byte, as
  the broker answers each Produce frame. ``Receive`` (stream-stream, as
  Consume is): a hello first, so a receiver knows it is counted, then the
  frames; its request side ending is its goodbye.
- sender: frames of a sequence number, ``time.time_ns()`` at sending and the
  scenarios' 100-byte payload, at a steady rate, each answered before the next.
- receiver: records its own clock for each frame, as the consumer loop does.
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import AsyncIterator
from multiprocessing.connection import Connection
from typing import Any

import grpc

from .messages import PAYLOAD
from .prioritized import message_id, paced
from .workers import Recorder, serve

SERVICE = "benchrelay.Relay"
SEND = f"/{SERVICE}/Send"
RECEIVE = f"/{SERVICE}/Receive"
HEADER = struct.Struct("<qq")  # sequence number, sent (wall clock ns)
FORWARDED, NO_RECEIVER = b"\x01", b"\x00"
HELLO = b""
PREFIX = "relay-"  # record ids: prioritized.message_id, priority 0
STOP_GRACE_S = 2.0


class Relay:
    """Hands each sent frame to the next connected receiver; nothing else."""

    def __init__(self) -> None:
        self.receivers: list[asyncio.Queue[bytes | None]] = []
        self.turn = 0

    def forward(self, frame: bytes) -> bool:
        if not self.receivers:
            return False
        self.turn = (self.turn + 1) % len(self.receivers)
        self.receivers[self.turn].put_nowait(frame)
        return True

    async def send(self, frames: AsyncIterator[bytes], _: Any) -> AsyncIterator[bytes]:
        async for frame in frames:
            yield FORWARDED if self.forward(frame) else NO_RECEIVER

    async def receive(self, requests: AsyncIterator[bytes], _: Any) -> AsyncIterator[bytes]:
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        goodbye = asyncio.create_task(_ended(requests, queue))
        self.receivers.append(queue)
        try:
            yield HELLO
            while (frame := await queue.get()) is not None:
                yield frame
        finally:
            self.receivers.remove(queue)
            goodbye.cancel()


async def _ended(requests: AsyncIterator[bytes], queue: asyncio.Queue[bytes | None]) -> None:
    """Close a receiver's stream once it stops writing (after what was queued)."""
    async for _ in requests:
        pass
    queue.put_nowait(None)


class RelayService:
    """The relay process: serves until ``stop``; ``address`` says where."""

    def __init__(self) -> None:
        self.server: grpc.aio.Server | None = None
        self.address = ""

    async def start(self) -> None:
        relay = Relay()
        handlers = {
            "Send": grpc.stream_stream_rpc_method_handler(relay.send),
            "Receive": grpc.stream_stream_rpc_method_handler(relay.receive),
        }
        self.server = grpc.aio.server()
        self.server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers),)
        )
        port = self.server.add_insecure_port("127.0.0.1:0")
        await self.server.start()
        self.address = f"127.0.0.1:{port}"

    async def handle(self, command: tuple[Any, ...]) -> Any:
        if command[0] == "address":
            return self.address
        raise ValueError(f"unknown command {command[0]!r}")

    async def stop(self) -> Any:
        if self.server is not None:
            await self.server.stop(STOP_GRACE_S)
        return None


class ReceiverService:
    """A receiver process: ``take`` hands over (received ns, sent ms, id) records."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.rec = Recorder()
        self.call: Any = None

    async def start(self) -> None:
        await self.rec.started(self.loop)

    async def loop(self) -> None:
        rec = self.rec
        async with grpc.aio.insecure_channel(self.address) as channel:
            self.call = call = channel.stream_stream(RECEIVE)()
            if await call.read() is grpc.aio.EOF:
                raise RuntimeError("the relay closed the stream before its hello")
            rec.ready.set()
            while (frame := await call.read()) is not grpc.aio.EOF:
                at = time.time_ns()
                seq, sent_ns = HEADER.unpack_from(frame)
                rec.add(at, sent_ns // 1_000_000, message_id(PREFIX, 0, seq, sent_ns))

    async def handle(self, command: tuple[Any, ...]) -> Any:
        if command[0] == "take":
            return self.rec.take()
        raise ValueError(f"unknown command {command[0]!r}")

    async def stop(self) -> Any:
        return await self.rec.finish(self.goodbye)

    async def goodbye(self) -> None:
        """Stop writing: the relay then ends the stream after what it queued."""
        if self.call is not None:
            await self.call.done_writing()


class SenderService:
    """The sender process: ``("trickle", rate, seconds)`` sends and answers counts."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.channel: grpc.aio.Channel | None = None

    async def start(self) -> None:
        self.channel = grpc.aio.insecure_channel(self.address)
        await self.channel.channel_ready()

    async def handle(self, command: tuple[Any, ...]) -> Any:
        if command[0] == "trickle" and self.channel is not None:
            return await trickle(self.channel, *command[1:])
        raise ValueError(f"unknown command {command[0]!r}")

    async def stop(self) -> Any:
        if self.channel is not None:
            await self.channel.close()
        return None


async def trickle(channel: grpc.aio.Channel, rate: int, seconds: float) -> dict[str, Any]:
    """``rate`` frames a second for ``seconds`` on one Send stream, each answered
    before the next (as ``prioritized.trickle`` sends through the driver)."""
    out = {"sent": 0, "forwarded": 0, "slowest_answer_ms": 0.0}
    call = channel.stream_stream(SEND)()
    async for seq, _ in paced(rate, seconds):
        sent = time.time_ns()
        await call.write(HEADER.pack(seq, sent) + PAYLOAD)
        answer = await call.read()
        out["slowest_answer_ms"] = max(out["slowest_answer_ms"], (time.time_ns() - sent) / 1e6)
        out["sent"] += 1
        out["forwarded"] += answer == FORWARDED
    await call.done_writing()
    if (code := await call.code()) != grpc.StatusCode.OK:
        raise RuntimeError(f"the relay ended the Send stream with {code}")
    out["slowest_answer_ms"] = round(out["slowest_answer_ms"], 2)
    return out


# -- entry points (module-level: the worker process imports them by name) --


def relay_main(conn: Connection) -> None:
    serve(conn, RelayService())


def receiver_main(conn: Connection, address: str) -> None:
    serve(conn, ReceiverService(address))


def sender_main(conn: Connection, address: str) -> None:
    serve(conn, SenderService(address))
