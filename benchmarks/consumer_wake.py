"""What a consumer's wake costs: the driver's path alone, without gRPC.

    python benchmarks/consumer_wake.py                  # due times spread, then bunched
    python benchmarks/consumer_wake.py --steps-ms 1,2,5,10 --rate 6667 --seconds 4

One ``Consumer`` in this process is fed delivery frames as a broker sends them
ahead (a frame of ``--frame-ms`` of due times, ``--ahead-ms`` before they are
due, ``sent_at`` its making), straight into the consumer's frame handler: no
stream, no broker process, the settles it queues dropped. An ``async for``
loop acks each delivery. The CPU of this process (``getrusage``: user and
system) over the loop is divided by the messages: the consumer's driver path,
the event loop's and the feeding's (one frame decode each), labelled as such,
never the product (``benchmarks/run.py --scenarios cpu`` measures that).

Due times spread evenly make the hold release at every ms, a wake each;
bunched into steps of N ms they make a wake every N ms with as many messages:
the difference between two steps over the difference of wakes (voluntary
context switches) is the cost of one wake.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from types import SimpleNamespace
from typing import Any

from dejaq.core.clock import now_ms
from dejaq.core.model import LeasedMessage
from dejaq.core.wire.batches import encode_deliveries
from dejaq.driver.consumer import Consumer
from dejaq.proto import dejaq_pb2 as pb

START_MS = 300  # the first due time after the frames are made


def frames(rate: int, seconds: float, step_ms: int, frame_ms: int) -> list[tuple[int, bytes]]:
    """Every frame, encoded before the clock runs, with its first message's due time."""
    start = now_ms() + START_MS
    per_frame = max(1, rate * frame_ms // 1000)
    out: list[tuple[int, bytes]] = []
    n = 0
    for k in range(int(seconds * 1000 / frame_ms)):
        first = start + k * frame_ms
        messages = []
        for i in range(per_frame):
            due = first + i * frame_ms // per_frame
            due -= (due - start) % step_ms
            messages.append(LeasedMessage(f"m{n}", due, b"x" * 100, 1, 1))
            n += 1
        out.append((first, encode_deliveries(messages, start + 600_000)))
    return out


async def measure(
    rate: int, seconds: float, step_ms: int, frame_ms: int, ahead_ms: int
) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    client: Any = SimpleNamespace(address="harness", timeout_s=5.0)
    consumer = Consumer(client, "wake")
    # Connected as far as the handler and the settles need: frames come from feed().
    consumer._loop = loop
    consumer._call = consumer._reader = object()  # type: ignore[assignment]
    consumer._settler.max_unanswered = 1 << 40  # no broker answers them
    made = frames(rate, seconds, step_ms, frame_ms)
    total = sum(1 for _ in made) * max(1, rate * frame_ms // 1000)

    async def feed() -> None:
        for first, body in made:
            wait = (first - ahead_ms - now_ms()) / 1000
            if wait > 0:
                await asyncio.sleep(wait)
            consumer._on_frame(pb.ConsumeResponse(deliveries=body, sent_at=now_ms()))

    async def drop_settles() -> None:
        while True:
            while not consumer._outbox.empty():
                consumer._outbox.get_nowait()
            await asyncio.sleep(0.05)

    tasks = [asyncio.create_task(feed()), asyncio.create_task(drop_settles())]
    await asyncio.sleep(max(0.0, (made[0][0] - now_ms()) / 1000))
    before, began = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    got = early = 0
    async for d in consumer:
        early += d.timestamp_ms > now_ms()
        await d.ack()
        got += 1
        if got == total:
            break
    after, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - began
    for task in tasks:
        task.cancel()
    return {
        "step_ms": step_ms,
        "messages": got,
        "early": early,
        "user_us": (after.ru_utime - before.ru_utime) * 1e6 / got,
        "system_us": (after.ru_stime - before.ru_stime) * 1e6 / got,
        "wakes_per_s": (after.ru_nvcsw - before.ru_nvcsw) / wall,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rate", type=int, default=6667, help="messages a second (one of 3 consumers at 20k/s)"
    )
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument(
        "--steps-ms", default="1,10", help="due times bunched to these steps, in turn"
    )
    parser.add_argument("--frame-ms", type=int, default=15, help="due times a frame spans")
    parser.add_argument("--ahead-ms", type=int, default=100, help="how early a frame is sent")
    args = parser.parse_args()
    rows = []
    for step in (int(s) for s in args.steps_ms.split(",")):
        plan = (args.rate, args.seconds, step, args.frame_ms, args.ahead_ms)
        rows.append(asyncio.run(measure(*plan)))
    print("step ms  messages  early  user µs  system µs  CPU µs  wakes/s")
    for r in rows:
        cpu = r["user_us"] + r["system_us"]
        print(
            f"{r['step_ms']:>7}  {r['messages']:>8}  {r['early']:>5}  {r['user_us']:>7.2f}"
            f"  {r['system_us']:>9.2f}  {cpu:>6.2f}  {r['wakes_per_s']:>7.0f}"
        )
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        extra = (a["wakes_per_s"] - b["wakes_per_s"]) * args.seconds
        cost = (a["user_us"] + a["system_us"] - b["user_us"] - b["system_us"]) * a["messages"]
        if extra > 0:
            steps = f"step {a['step_ms']} against {b['step_ms']} ms"
            print(f"one wake: {cost / extra:.1f} µs of CPU ({steps})")


if __name__ == "__main__":
    main()
