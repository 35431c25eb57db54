"""WIRE LIMIT ONLY: a private client on the broker's wire protocol. Never a product figure.

Product figures come from ``dejaq.driver`` and the CLI (DESIGN.md). This
client shows how far the broker's wire goes when the client does no
per-message Python work, so a reader can tell the driver's cost from the
broker's; ``scenarios/wire_limit.py`` is its only user, reported apart.

The driver (``dejaq.driver``) builds an object and a future per message and per
ack; at 100k+ messages a second that Python work in the one client process
hides what the broker can do. Here frames are built column-wise
(``encode_messages`` from lists), deliveries are read column-wise (numpy
timestamps: lateness for a whole frame in one subtraction), and each delivery
frame is acked by one Settle frame. Same proto, same broker code paths.

- ``produce``: pipelined Produce frames (``in_flight`` at once on one stream),
  from an iterator, so millions of messages never sit in memory at once.
- ``Tally`` + ``LeanConsumer``: Consume streams that record lateness
  (``received - due``, float ms) per message and ack every frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import grpc
import numpy as np
import numpy.typing as npt

from dejaq.core.wire.batches import encode_messages
from dejaq.driver.client import Client
from dejaq.fbs.batch import DeliveryBatch, ProduceResults
from dejaq.proto import dejaq_pb2 as pb

from .messages import PAYLOAD, Ids

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Frame:
    request: pb.ProduceRequest
    count: int


def frame(
    topic: str, ids: Sequence[str], timestamps: Sequence[int] | npt.NDArray[np.int64]
) -> Frame:
    batch = encode_messages(timestamps, [PAYLOAD] * len(ids), ids)
    return Frame(pb.ProduceRequest(topic=topic, batch=batch), len(ids))


def frames(
    topic: str, timestamps: Callable[[int, int], Sequence[int]], total: int, batch: int
) -> Iterator[Frame]:
    """Lazily: frames of ``batch`` messages until ``total``; ``timestamps(start, n)``
    gives the due times of messages ``start .. start + n``."""
    ids = Ids()
    for start in range(0, total, batch):
        n = min(batch, total - start)
        yield frame(topic, ids.take(n), timestamps(start, n))


@dataclass
class Produced:
    sent: int = 0
    accepted: int = 0
    not_accepted: int = 0  # duplicates and rejections
    frames: int = 0
    seconds: float = 0.0
    capped: bool = False  # stopped by the time cap before sending everything

    @property
    def rate(self) -> float:
        return self.accepted / self.seconds if self.seconds > 0 else 0.0


async def produce(
    client: Client,
    source: Iterable[Frame],
    in_flight: int,
    cap_s: float,
    first: Frame | None = None,
) -> Produced:
    """Send ``source`` on one Produce stream, ``in_flight`` frames pipelined.

    ``first`` (a warm-up frame) opens the stream and is answered before the
    clock starts. Stops sending when ``cap_s`` has passed; always waits for
    the answers of what it sent.
    """
    call = client.stub().Produce()
    out = Produced()
    if first is not None:
        await call.write(first.request)
        await call.read()
    slots = asyncio.Semaphore(in_flight)
    written = answered = 0
    writing_done = False

    async def reader() -> None:
        nonlocal answered
        try:
            while True:
                response = await call.read()
                if response is grpc.aio.EOF:
                    raise ConnectionError("the broker closed the Produce stream")
                answered += 1
                slots.release()
                results = ProduceResults.ProduceResults.GetRootAs(response.results, 0)  # type: ignore[no-untyped-call]
                status = results.StatusAsNumpy()
                if isinstance(status, np.ndarray):
                    ok = int(np.count_nonzero(status == 0))
                    out.accepted += ok
                    out.not_accepted += len(status) - ok
                if writing_done and answered == written:
                    return
        except Exception:
            for _ in range(in_flight):
                slots.release()  # so the writer does not wait for answers that will not come
            raise

    start = time.perf_counter()
    deadline = start + cap_s
    reading = asyncio.create_task(reader())
    try:
        for f in source:
            if time.perf_counter() > deadline:
                out.capped = True
                break
            await slots.acquire()
            if reading.done():
                break  # the reader failed: its exception is raised below
            await call.write(f.request)
            written += 1
            out.sent += f.count
        writing_done = True
        if answered == written:
            reading.cancel()  # it waits for an answer that will not come
        with contextlib.suppress(asyncio.CancelledError):
            await reading
        out.seconds = time.perf_counter() - start
        out.frames = written
    finally:
        reading.cancel()
        with contextlib.suppress(grpc.RpcError):
            await call.done_writing()
        call.cancel()
    return out


class Tally:
    """What the consumers of one scenario saw, shared by all of them."""

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.seen: set[str] = set()
        self.duplicates = 0
        self.lateness: list[F64] = []  # one array per delivery frame
        self.first_ns = 0
        self.last_ns = 0
        self.frames = 0
        self.unsettled = 0  # ack frames sent and not yet confirmed
        self.failed_acks = 0
        self.last_ack_ns = 0
        self.done = asyncio.Event()  # every expected message received and its ack confirmed

    @property
    def delivered(self) -> int:
        return len(self.seen)

    def received(self, ids: list[str], due: npt.NDArray[np.int64], at_ns: int) -> None:
        before = len(self.seen)
        self.seen.update(ids)
        self.duplicates += len(ids) - (len(self.seen) - before)
        self.lateness.append(at_ns / 1e6 - due.astype(np.float64))
        self.first_ns = self.first_ns or at_ns
        self.last_ns = at_ns
        self.frames += 1

    def settled(self, failed: int) -> None:
        self.unsettled -= 1
        self.failed_acks += failed
        self.last_ack_ns = time.time_ns()
        self.check()

    def check(self) -> None:
        if len(self.seen) >= self.expected and self.unsettled == 0:
            self.done.set()

    def values(self) -> F64:
        return np.concatenate(self.lateness) if self.lateness else np.zeros(0)


class LeanConsumer:
    """One Consume stream: acks each delivery frame with one Settle frame and
    gives the frame's credit back at once."""

    def __init__(self, client: Client, topic: str, credits: int, tally: Tally) -> None:
        self.client = client
        self.topic = topic
        self.credits = credits
        self.tally = tally
        self._call: grpc.aio.StreamStreamCall | None = None
        self._outbox: asyncio.Queue[pb.ConsumeRequest | None] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._tokens = itertools.count(1)

    async def __aenter__(self) -> LeanConsumer:
        call = self.client.stub().Consume()
        hello = pb.Hello(topic=self.topic, credits=self.credits)
        await call.write(pb.ConsumeRequest(hello=hello))
        welcome = await call.read()
        if welcome is grpc.aio.EOF or welcome.WhichOneof("frame") != "welcome":
            raise ConnectionError("the broker did not welcome the consumer")
        self._call = call
        self._tasks = [
            asyncio.create_task(self._read(call)),
            asyncio.create_task(self._write(call)),
        ]
        return self

    async def __aexit__(self, *exc: object) -> None:
        call = self._call
        if call is None:
            return
        self._outbox.put_nowait(pb.ConsumeRequest(goodbye=pb.Goodbye()))
        self._outbox.put_nowait(None)
        with contextlib.suppress(TimeoutError, asyncio.CancelledError, grpc.RpcError):
            await asyncio.wait_for(asyncio.shield(self._tasks[1]), 5)
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, grpc.RpcError, ConnectionError):
                await task
        call.cancel()

    async def _write(self, call: grpc.aio.StreamStreamCall) -> None:
        while (req := await self._outbox.get()) is not None:
            await call.write(req)
        await call.done_writing()

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        while (response := await call.read()) is not grpc.aio.EOF:
            kind = response.WhichOneof("frame")
            if kind == "deliveries":
                self._deliveries(response.deliveries, time.time_ns())
            elif kind == "settled":
                self.tally.settled(len(response.settled.rejections))

    def _deliveries(self, buf: bytes, at_ns: int) -> None:
        batch = DeliveryBatch.DeliveryBatch.GetRootAs(buf, 0)  # type: ignore[no-untyped-call]
        due = batch.TimestampsAsNumpy()
        if not isinstance(due, np.ndarray):
            return
        text = batch.IdsAsNumpy().tobytes().decode()
        o = batch.IdOffsetsAsNumpy().tolist()
        ids = [text[o[i] : o[i + 1]] for i in range(len(due))]
        self.tally.received(ids, due, at_ns)
        settle = pb.Settle(
            kind=pb.Settle.ACK,
            ids=ids,
            versions=batch.VersionsAsNumpy().tolist(),
            token=next(self._tokens),
        )
        self.tally.unsettled += 1
        self._outbox.put_nowait(pb.ConsumeRequest(settle=settle))
        self._outbox.put_nowait(pb.ConsumeRequest(credits=len(ids)))
