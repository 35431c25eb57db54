"""The producer side of the priority scenario: messages of mixed priorities
through ``Producer.send`` (one at a time, at a steady rate) or
``Producer.send_batch`` (a backlog), each id carrying what the harness needs
to judge it: its priority, its sequence number and when it was sent.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import AsyncIterator
from typing import Any, NamedTuple

from dejaq.core.clock import now_ms
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer

from .messages import PAYLOAD

CHUNK = 1000  # backlog messages per send_batch call


class Tag(NamedTuple):
    """What a message id says: its priority, its sequence number, when it was sent (ns)."""

    priority: int
    seq: int
    sent_ns: int


def message_id(prefix: str, priority: int, seq: int, sent_ns: int) -> str:
    return f"{prefix}{priority:04d}-{seq:09d}-{sent_ns}"


def tag_of(prefix: str, message_id: str) -> Tag:
    priority, seq, sent_ns = message_id.removeprefix(prefix).split("-")
    return Tag(int(priority), int(seq), int(sent_ns))


async def paced(rate: int, seconds: float) -> AsyncIterator[tuple[int, float]]:
    """Sequence numbers ``0 .. rate * seconds - 1``, each when its turn comes at
    ``rate`` a second from the first, with how late it is for its turn (s): a
    caller slower than the pace gets the late ones at once, and the lateness
    shows the sender, not the path, set the pace."""
    start = time.perf_counter()
    for seq in range(max(1, round(rate * seconds))):
        wait_s = start + seq / rate - time.perf_counter()
        if wait_s > 0:
            await asyncio.sleep(wait_s)
        yield seq, max(0.0, -wait_s)


async def trickle(
    client: Client, topic: str, rate: int, seconds: float, levels: int, prefix: str
) -> dict[str, Any]:
    """``rate`` messages a second for ``seconds``, one ``Producer.send`` at a time
    (each answered before the next), priorities drawn from ``0 .. levels - 1``."""
    rng = random.Random(prefix)
    out = {"sent": 0, "accepted": 0, "behind_schedule_ms": 0.0, "slowest_answer_ms": 0.0}
    async with Producer(client, topic) as producer:
        async for seq, behind_s in paced(rate, seconds):
            out["behind_schedule_ms"] = max(out["behind_schedule_ms"], behind_s * 1000)
            priority = rng.randrange(levels)
            sent = time.time_ns()
            result = await producer.send(
                PAYLOAD, id=message_id(prefix, priority, seq, sent), priority=priority
            )
            answer_ms = (time.time_ns() - sent) / 1e6
            out["slowest_answer_ms"] = max(out["slowest_answer_ms"], answer_ms)
            out["sent"] += 1
            out["accepted"] += result.accepted
    out["behind_schedule_ms"] = round(out["behind_schedule_ms"], 1)
    out["slowest_answer_ms"] = round(out["slowest_answer_ms"], 2)
    return out


async def round_trips(client: Client, rate: int, seconds: float) -> list[float]:
    """The wire's floor beside the trickle: ``rate`` unary calls a second
    (``Admin.list_topics``, each answered before the next) for ``seconds``,
    each call's round trip in ms. A message's produce-to-receive crosses the
    wire twice (producer to broker, broker to consumer): about one round trip
    is the least it can take."""
    admin = Admin(client)
    out: list[float] = []
    async for _ in paced(rate, seconds):
        sent = time.perf_counter()
        await admin.list_topics()
        out.append((time.perf_counter() - sent) * 1000)
    return out


async def backlog(client: Client, topic: str, n: int, levels: int, prefix: str) -> dict[str, Any]:
    """``n`` messages available now, priorities drawn from ``0 .. levels - 1``,
    through ``send_batch``; answers once every one is stored."""
    rng = random.Random(prefix)
    accepted = 0
    async with Producer(client, topic, max_batch=CHUNK) as producer:
        for start in range(0, n, CHUNK):
            batch = []
            for seq in range(start, min(n, start + CHUNK)):
                priority = rng.randrange(levels)
                mid = message_id(prefix, priority, seq, time.time_ns())
                batch.append(Outgoing(PAYLOAD, now_ms(), mid, priority=priority))
            accepted += sum(r.accepted for r in await producer.send_batch(batch))
    return {"sent": n, "accepted": accepted}
