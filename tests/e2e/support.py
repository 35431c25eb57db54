"""Helpers the end-to-end stories share: deadlines, an inbox per consumer, produce shortcuts.

Nothing here sleeps to wait for a condition: ``Inbox`` awaits deliveries with
a deadline, and ``wait_until`` polls a condition until a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

import grpc

from dejaq.core.clock import now_ms
from dejaq.core.model import InsertStatus, TopicSettings
from dejaq.core.wire.batches import decode_results, encode_messages
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer, Delivery
from dejaq.driver.producer import Outgoing, Producer, ProduceResult
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc

POLL_S = 0.02


FAR_MS = 4_102_444_800_000  # 2100-01-01


def frame(topic: str, *ids: str) -> pb.ProduceRequest:
    """A Produce frame of messages with these ids, due far ahead."""
    batch = encode_messages([FAR_MS] * len(ids), [b"p"] * len(ids), list(ids))
    return pb.ProduceRequest(topic=topic, batch=batch)


def produce_sync(
    address: str, frames: list[pb.ProduceRequest], token: str = ""
) -> tuple[grpc.StatusCode, list[tuple[list[int], list[str]]]]:
    """One Produce stream through the blocking API, whose final status is the
    broker's (grpc.aio may report a write the broker cut short as its own
    INTERNAL, grpc/grpc#36066); the answers, decoded. ``token``: sent as the
    bearer token (plaintext, to a broker on loopback)."""
    answers = []
    metadata = (("authorization", f"Bearer {token}"),) if token else None
    with grpc.insecure_channel(address) as channel:
        call = pb_grpc.TimelineStub(channel).Produce(iter(frames), timeout=10, metadata=metadata)
        try:
            answers += [decode_results(a.results) for a in call]
        except grpc.RpcError as exc:
            return exc.code(), answers
    return grpc.StatusCode.OK, answers


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]],
    timeout_s: float = 10.0,
    what: str = "condition",
) -> None:
    """Poll ``condition`` (sync or async) until it holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if inspect.isawaitable(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(POLL_S)


class Inbox:
    """Takes a consumer's deliveries as they arrive, so a test can await them
    with deadlines (cancelling a wait never ends the consumer's iterator)."""

    def __init__(self, consumer: Consumer) -> None:
        self.consumer = consumer
        self.queue: asyncio.Queue[Delivery] = asyncio.Queue()
        self.received: list[Delivery] = []
        self._surfaced = False  # the consumer's error was raised to the test already
        self._pump = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for delivery in self.consumer:
            self.received.append(delivery)
            self.queue.put_nowait(delivery)

    async def next(self, timeout_s: float = 10.0) -> Delivery:
        """The next delivery; fail if none arrives within ``timeout_s``."""
        get = asyncio.ensure_future(self.queue.get())
        done, _ = await asyncio.wait(
            {get, self._pump}, timeout=timeout_s, return_when="FIRST_COMPLETED"
        )
        if get in done:
            return get.result()
        get.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await get
        if self._pump.done():
            self._surfaced = True
            self._pump.result()  # the consumer failed: raise why
            raise AssertionError("the consumer ended")
        raise AssertionError(f"no delivery within {timeout_s} s")

    async def take(self, n: int, timeout_s: float = 10.0) -> list[Delivery]:
        """The next ``n`` deliveries, all within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        out: list[Delivery] = []
        while len(out) < n:
            left = deadline - time.monotonic()
            try:
                out.append(await self.next(max(left, 0.001)))
            except AssertionError as exc:
                raise AssertionError(f"got {len(out)} of {n} deliveries: {exc}") from None
        return out

    async def quiet_for(self, seconds: float) -> None:
        """Assert that nothing arrives for ``seconds``."""
        try:
            d = await self.next(seconds)
        except AssertionError as exc:
            if "no delivery" in str(exc):
                return
            raise
        raise AssertionError(f"unexpected delivery of {d.id} (deliveries {d.deliveries})")

    async def close(self) -> None:
        """Leave cleanly (the broker releases our leases) and stop taking deliveries."""
        await self.consumer.close()
        await asyncio.wait({self._pump}, timeout=10)
        if not self._pump.done():
            self._pump.cancel()
            raise AssertionError("the consumer did not end after close()")
        if not self._surfaced and not self._pump.cancelled():
            self._pump.result()


@contextlib.asynccontextmanager
async def consuming(client: Client, topic: str, **options: Any) -> AsyncIterator[Inbox]:
    """A started consumer (``Consumer`` options) and its inbox; closed cleanly at the end."""
    consumer = await Consumer(client, topic, **options).start()
    inbox = Inbox(consumer)
    try:
        yield inbox
    finally:
        await inbox.close()


async def create_topic(client: Client, name: str, **settings: Any) -> str:
    await Admin(client).create_topic(name, TopicSettings(**settings))
    return name


async def produce(client: Client, topic: str, messages: Sequence[Outgoing]) -> list[ProduceResult]:
    """Send ``messages`` in one frame; every one must be accepted."""
    async with Producer(client, topic) as producer:
        results = await producer.send_batch(messages)
    assert [r.status for r in results] == [InsertStatus.ACCEPTED] * len(messages), [
        (r.status, r.error) for r in results
    ]
    return results


async def produce_one(
    client: Client, topic: str, at_ms: int, payload: bytes = b"x", **kw: Any
) -> str:
    (result,) = await produce(client, topic, [Outgoing(payload, at_ms, **kw)])
    return result.id


async def counts(client: Client, topic: str) -> tuple[int, int, int, int]:
    """A topic's (waiting, due, leased, dead) counts."""
    c = (await Admin(client).describe_topic(topic)).counts
    return (c.waiting, c.due, c.leased, c.dead)


EMPTY = (0, 0, 0, 0)


async def dead_ids(client: Client, topic: str) -> set[str]:
    """The ids on a topic's dead timeline."""
    return {info.message.id for info in await Admin(client).list_dead(topic)}


def dead_includes(client: Client, topic: str, *ids: str) -> Callable[[], Awaitable[bool]]:
    """A ``wait_until`` condition: all of ``ids`` are dead."""

    async def check() -> bool:
        return set(ids) <= await dead_ids(client, topic)

    return check


async def ack_all(deliveries: Sequence[Delivery]) -> None:
    await asyncio.gather(*(d.ack(confirm=True) for d in deliveries))


async def assert_serves(address: str) -> None:
    """The broker still works: a new topic takes a message and delivers it."""
    async with Client(address) as client:
        topic = await create_topic(client, f"still-serving-{uuid.uuid4().hex[:8]}")
        mid = await produce_one(client, topic, now_ms(), b"still here")
        async with consuming(client, topic, credits=1) as inbox:
            d = await inbox.next(10)
            assert (d.id, d.payload) == (mid, b"still here")
            await d.ack(confirm=True)


CHILD_CONSUMER = """
import asyncio, json, sys
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer

async def main(address, topic, count, lease_ms):
    async with Client(address) as client:
        consumer = await Consumer(client, topic, lease_ms=lease_ms).start()
        got = 0
        async for d in consumer:
            print(json.dumps({"id": d.id, "lease_until_ms": d.lease_until_ms}), flush=True)
            got += 1
            if got == count:
                await asyncio.Event().wait()  # hold the leases until killed

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
"""


class ChildConsumer:
    """A consumer in a process of its own that takes ``count`` messages, never acks,
    and holds them until it is killed: a consumer whose process dies."""

    def __init__(self, process: asyncio.subprocess.Process, lease_until: dict[str, int]) -> None:
        self.process = process
        self.lease_until = lease_until  # message id -> lease expiry it was told

    @classmethod
    async def start(
        cls, address: str, topic: str, count: int, lease_ms: int, timeout_s: float = 30.0
    ) -> ChildConsumer:
        """Start it and wait until it holds ``count`` messages."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CHILD_CONSUMER,
            address,
            topic,
            str(count),
            str(lease_ms),
            stdout=asyncio.subprocess.PIPE,
        )
        child = cls(process, {})
        assert process.stdout is not None
        try:
            for _ in range(count):
                line = await asyncio.wait_for(process.stdout.readline(), timeout_s)
                held = json.loads(line)
                child.lease_until[held["id"]] = held["lease_until_ms"]
        except BaseException:
            await child.kill()
            raise
        return child

    async def kill(self) -> None:
        """SIGKILL: no goodbye, no flush."""
        if self.process.returncode is None:
            self.process.kill()
        await self.process.wait()
        assert self.process.stdout is not None
        await self.process.stdout.read()
