"""The fault run's producers and consumers: separate processes that use the
public driver as an application does, and journal everything they see.

    python -m tests.faults.workers produce NAME JOURNAL BROKERS SEED SECONDS
    python -m tests.faults.workers consume NAME JOURNAL BROKERS LEASE_MS

A producer sends a small frame every few milliseconds for SECONDS, each
message to the at-least-once topic or (one in five) to the at-most-once one,
due 200-2000 ms ahead, then waits for every answer and exits. Each process
has one client, shared by its two streams as an application shares one. A consumer
takes both topics until SIGTERM: it acks each at-least-once delivery after a
short random "work" (confirmed, so the journal knows the outcome); an
at-most-once delivery is gone once delivered, there is nothing to ack.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from dejaq.core.clock import now_ms
from dejaq.core.errors import DejaqError
from dejaq.driver.client import Client
from dejaq.driver.consumer import Consumer, Delivery
from dejaq.driver.producer import Outgoing, Producer, ProduceResult
from tests.faults.journal import Journal

AT_LEAST_ONCE = "alo"
AT_MOST_ONCE = "amo"
TOPICS = (AT_LEAST_ONCE, AT_MOST_ONCE)
FRAME = 4  # messages a frame
PACE_S = 0.05  # between frames: ~80 messages a second a producer
DUE_MS = (200, 2000)
AT_MOST_ONCE_SHARE = 0.2
WORK_MS = (0, 60)
CREDITS = 32
RETRY_S = 60.0  # a driver keeps trying through every fault of the run


def _awaiting(coro: object) -> list[str]:
    """Where a task waits: each coroutine of the chain it awaits through, down
    to what the last one awaits (a future, or code in Cython with no frame)."""
    lines = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "ag_frame", None)
        if frame is None:
            lines.append(f"awaiting {coro!r}"[:300])
            break
        lines.append(f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "ag_await", None)
    return lines


def _dump_tasks_on_sigusr1() -> None:
    """SIGUSR1 prints every task's stack to stderr (the worker's log): what a
    worker that does not end is waiting for."""

    def dump() -> None:
        for task in asyncio.all_tasks():
            print(f"-- {task!r}", file=sys.stderr)
            for line in _awaiting(task.get_coro()):
                print(f"   {line}", file=sys.stderr)
        sys.stderr.flush()

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, dump)


async def produce(
    name: str, journal: Journal, brokers: Sequence[str], seed: int, seconds: float
) -> None:
    _dump_tasks_on_sigusr1()
    rng = random.Random(seed)
    # One client (one channel) for both producers, as an application shares
    # one: a failover of either stream moves both.
    async with Client(list(brokers)) as client:
        producers = {t: Producer(client, t, retry_timeout_s=RETRY_S) for t in TOPICS}
        sends: set[asyncio.Task[None]] = set()
        deadline = time.monotonic() + seconds
        n = 0
        while time.monotonic() < deadline:
            frames: dict[str, list[Outgoing]] = {t: [] for t in TOPICS}
            for _ in range(FRAME):
                topic = AT_MOST_ONCE if rng.random() < AT_MOST_ONCE_SHARE else AT_LEAST_ONCE
                mid, due = f"{name}-{n}", now_ms() + rng.randint(*DUE_MS)
                n += 1
                journal.write("send", topic=topic, id=mid, due=due, at=now_ms())
                frames[topic].append(Outgoing(b"x", due, id=mid))
            for topic, batch in frames.items():
                if batch:
                    task = asyncio.create_task(_send(journal, producers[topic], topic, batch))
                    sends.add(task)
                    task.add_done_callback(sends.discard)
            await asyncio.sleep(PACE_S)
        if sends:
            await asyncio.wait(set(sends))
        for p in producers.values():
            with contextlib.suppress(DejaqError):
                await p.close()


async def _send(journal: Journal, producer: Producer, topic: str, batch: list[Outgoing]) -> None:
    try:
        results: list[ProduceResult] = await producer.send_batch(batch)
    except DejaqError as exc:
        for m in batch:
            journal.write("sent", topic=topic, id=m.id, status="failed", error=repr(exc))
        return
    for r in results:
        error = repr(r.error) if r.error else None
        journal.write("sent", topic=topic, id=r.id, status=r.status.name.lower(), error=error)


async def consume(name: str, journal: Journal, brokers: Sequence[str], lease_ms: int) -> None:
    _dump_tasks_on_sigusr1()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    rng = random.Random(name)
    consumers = []
    client = Client(list(brokers))  # shared by both topics' consumers, as for the producers
    for topic in TOPICS:
        c = Consumer(
            client,
            topic,
            consumer_id=name,
            lease_ms=lease_ms if topic == AT_LEAST_ONCE else 0,
            credits=CREDITS,
            retry_timeout_s=RETRY_S,
        )
        consumers.append(await c.start())
    journal.write("ready", consumer=name, at=now_ms())
    pumps = [asyncio.create_task(_pump(name, journal, c, rng)) for c in consumers]
    await stop.wait()
    for c in consumers:
        with contextlib.suppress(DejaqError):
            await c.close()
    for task in pumps:
        task.cancel()
    await asyncio.gather(*pumps, return_exceptions=True)
    await client.close()


async def _pump(name: str, journal: Journal, consumer: Consumer, rng: random.Random) -> None:
    acks: set[asyncio.Task[None]] = set()
    async for d in consumer:
        journal.write(
            "deliver",
            topic=consumer.topic,
            id=d.id,
            consumer=name,
            broker=consumer.client.address,
            version=d.version,
            deliveries=d.deliveries,
            due=d.timestamp_ms,
            recv=d.received_at_ms,
            lease_until=d.lease_until_ms,
        )
        if consumer.topic == AT_LEAST_ONCE:
            task = asyncio.create_task(_work_and_ack(name, journal, d, rng.randint(*WORK_MS)))
            acks.add(task)
            task.add_done_callback(acks.discard)


async def _work_and_ack(name: str, journal: Journal, d: Delivery, work_ms: int) -> None:
    await asyncio.sleep(work_ms / 1000)
    version = d.version
    try:
        await d.ack(confirm=True)
    except DejaqError as exc:
        journal.write(
            "ack",
            topic=AT_LEAST_ONCE,
            id=d.id,
            consumer=name,
            version=version,
            ok=False,
            error=type(exc).__name__,
            at=now_ms(),
        )
        return
    journal.write(
        "ack", topic=AT_LEAST_ONCE, id=d.id, consumer=name, version=version, ok=True, at=now_ms()
    )


def main(argv: Sequence[str]) -> None:
    role, name, path, brokers = argv[0], argv[1], Path(argv[2]), argv[3].split(",")
    journal = Journal(path)
    try:
        if role == "produce":
            asyncio.run(produce(name, journal, brokers, int(argv[4]), float(argv[5])))
        elif role == "consume":
            asyncio.run(consume(name, journal, brokers, int(argv[4])))
        else:
            raise SystemExit(f"unknown role {role!r}")
    finally:
        journal.close()


if __name__ == "__main__":
    main(sys.argv[1:])
