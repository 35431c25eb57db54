"""The broker in-process: a BrokerContext over ``memory://`` with a clock the
test moves by hand, and consumer sessions driven frame by frame.

No subprocess, no socket, no wall clock: the dispatcher sleeps on the manual
clock, so "never early" is checked at the exact millisecond. (``HostClocks``:
a host's wall and monotonic clocks, for a clock that watches one against the
other.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from dejaq.broker.api.consume import consume_stream
from dejaq.broker.api.produce import produce
from dejaq.broker.api.topics import TopicCache
from dejaq.broker.config import BrokerConfig
from dejaq.broker.context import BrokerContext
from dejaq.broker.coordination import LocalCoordinator
from dejaq.core.clock import Wake
from dejaq.core.model import LeasedMessage
from dejaq.core.wire.batches import decode_deliveries, encode_messages
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins import Storage
from dejaq.storage_plugins.memory import MemoryStorage

START_MS = 1_800_000_000_000


class ManualClock:
    """A clock that moves only when told; sleepers wake when it passes their time."""

    def __init__(self, now: int = START_MS) -> None:
        self.now = now
        self._moved = asyncio.Event()

    def now_ms(self) -> int:
        return self.now

    async def wait_until(self, at_ms: int, wake: Wake) -> None:
        while self.now < at_ms and not wake.is_set():
            moved = asyncio.ensure_future(self._moved.wait())
            woken = asyncio.ensure_future(wake.wait())
            try:
                await asyncio.wait({moved, woken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                moved.cancel()
                woken.cancel()

    def advance(self, ms: int) -> None:
        self.now += ms
        self._moved.set()
        self._moved = asyncio.Event()


class HostClocks:
    """This host's wall and monotonic clocks (µs), moved by hand: ``advance``
    moves both, ``step`` the wall clock alone (NTP, an operator, faketime)."""

    def __init__(self) -> None:
        self.wall_us = 1_800_000_000_000_000
        self.mono_us = 5_000_000

    def __call__(self) -> tuple[int, int]:
        return self.wall_us, self.mono_us

    def advance(self, ms: int) -> None:
        self.wall_us += ms * 1_000
        self.mono_us += ms * 1_000

    def step(self, ms: int) -> None:
        self.wall_us += ms * 1_000

    @property
    def wall_ms(self) -> int:
        return self.wall_us // 1_000


async def settle_down() -> None:
    """Let every task that can run, run (the dispatcher, the stream readers)."""
    for _ in range(20):
        await asyncio.sleep(0)


@contextlib.asynccontextmanager
async def running_broker(
    clock: ManualClock, lookahead_ms: int = 20, send_ahead_ms: int = 25
) -> AsyncIterator[BrokerContext]:
    """``make_broker`` for a test's fixture: its dispatchers dropped and its
    storage closed when the test is over."""
    broker = await make_broker(clock, lookahead_ms, send_ahead_ms)
    try:
        yield broker
    finally:
        await stop(broker)


async def stop(broker: BrokerContext) -> None:
    """A test's broker over: its dispatchers dropped, its storage closed."""
    for d in list(broker.dispatchers):
        await broker.drop_dispatcher(d, RuntimeError("test over"))
    await broker.storage.close()


async def make_broker(
    clock: ManualClock,
    lookahead_ms: int = 20,
    send_ahead_ms: int = 25,
    storage: Storage | None = None,
) -> BrokerContext:
    """A broker over ``storage`` (opened; None: a new ``memory://``)."""
    if storage is None:
        storage = MemoryStorage("memory://")
        await storage.open()
    # rescan_ms: a missed wake-up would show as a hang
    config = BrokerConfig(
        rescan_ms=3_600_000, lookahead_ms=lookahead_ms, send_ahead_ms=send_ahead_ms
    )
    return BrokerContext(config, storage, LocalCoordinator(), TopicCache(storage), clock=clock)


async def produce_at(broker: BrokerContext, topic: str, stamps: Sequence[int]) -> list[str]:
    """Produce one message per timestamp; the ids, in order."""
    ids = [f"m{i}-{t}" for i, t in enumerate(stamps)]
    batch = encode_messages(list(stamps), [b"x"] * len(stamps), ids)
    await produce(broker, pb.ProduceRequest(topic=topic, batch=batch))
    return ids


class Session:
    """A consumer stream in-process: frames in through a queue, frames out collected
    (``sent_at``: each delivery's frame's stamp; ``hold_ms``: the Hello's)."""

    def __init__(
        self,
        broker: BrokerContext,
        topic: str,
        consumer_id: str,
        credits: int,
        hold_ms: int = 0,
    ) -> None:
        self.inbound: asyncio.Queue[pb.ConsumeRequest | None] = asyncio.Queue()
        hello = pb.Hello(topic=topic, consumer_id=consumer_id, credits=credits, hold_ms=hold_ms)
        self.inbound.put_nowait(pb.ConsumeRequest(hello=hello))
        self.deliveries: list[LeasedMessage] = []
        self.sent_at: list[int] = []
        self.settled: list[pb.SettleResult] = []
        self.error: BaseException | None = None
        self._task = asyncio.create_task(self._run(broker))

    async def _requests(self) -> AsyncIterator[pb.ConsumeRequest]:
        while (req := await self.inbound.get()) is not None:
            yield req

    async def _run(self, broker: BrokerContext) -> None:
        try:
            async for frame in consume_stream(broker, self._requests()):
                kind = frame.WhichOneof("frame")
                if kind == "deliveries":
                    got = decode_deliveries(frame.deliveries)[0]
                    self.deliveries += got
                    self.sent_at += [frame.sent_at] * len(got)
                elif kind == "settled":
                    self.settled.append(frame.settled)
        except Exception as exc:
            self.error = exc

    @property
    def ids(self) -> list[str]:
        return [d.id for d in self.deliveries]

    def send(self, req: pb.ConsumeRequest) -> None:
        self.inbound.put_nowait(req)

    def ack(self, deliveries: Sequence[LeasedMessage], credits: int = 0) -> None:
        settle = pb.Settle(
            kind=pb.Settle.ACK,
            ids=[d.id for d in deliveries],
            versions=[d.version for d in deliveries],
            token=len(self.settled) + 1,
            credits=credits,
        )
        self.send(pb.ConsumeRequest(settle=settle))

    async def ended(self) -> None:
        """Until the broker ends the stream."""
        await asyncio.shield(self._task)

    async def close(self) -> None:
        self.send(pb.ConsumeRequest(goodbye=pb.Goodbye()))
        self.inbound.put_nowait(None)
        await asyncio.wait_for(self._task, 5)

    async def vanish(self) -> None:
        """End the request stream without a Goodbye, as a consumer that died."""
        self.inbound.put_nowait(None)
        await asyncio.wait_for(self._task, 5)


class LoopTurns:
    """Counts the event loop's turns while it is entered (``async with``):
    ``now`` is how many have passed, so two calls a turn apart differ."""

    def __init__(self) -> None:
        self.now = 0
        self._task: asyncio.Task[None] | None = None

    async def _count(self) -> None:
        while True:
            self.now += 1
            await asyncio.sleep(0)

    async def __aenter__(self) -> LoopTurns:
        self._task = asyncio.create_task(self._count())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
