"""What the bridge tests share: a bridges file of one Redis Stream -> Redis
Stream bridge, messages written out of order, and the sink's entries read back."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import redis

TOPIC = "reorder"
KEYS = 20


def bridges_file(source_url: str, sink_url: str, name: str = "reorder") -> str:
    """A file of one bridge from stream ``in`` at ``source_url`` to ``out`` at
    ``sink_url``, due by ``due_ms``, id by ``id``, keyed by ``user``."""
    source = source_url.replace("redis://", "redis-stream://")
    sink = sink_url.replace("redis://", "redis-stream://")
    return f"""
bridges:
  - name: {name}
    source: {{url: "{source}", stream: "in", group: "dejaq"}}
    topic: {TOPIC}
    due: {{field: "due_ms"}}
    id: {{field: "id"}}
    key: {{field: "user"}}
    sink: {{url: "{sink}", stream: "out"}}
"""


def write(
    client: redis.Redis, count: int, spread_ms: int, first: int = 0, lead_ms: int = 500
) -> None:
    """``count`` entries in stream ``in``, ids ``m<first>``..., each due at a
    random time from ``lead_ms`` to ``lead_ms + spread_ms`` from now: in due
    order they arrive shuffled."""
    now = int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    for i in range(first, first + count):
        due = now + lead_ms + random.randrange(spread_ms)
        fields = {"payload": f"p{i}", "due_ms": str(due), "id": f"m{i}", "user": f"u{i % KEYS}"}
        pipe.xadd("in", fields)  # type: ignore[arg-type]
        if len(pipe) >= 5000:
            pipe.execute()
    pipe.execute()


@dataclass(frozen=True)
class Published:
    id: str
    user: str
    due_ms: int
    at_ms: int  # when the sink's server had it (or, where it cannot say, a reader got it)


def published(client: redis.Redis) -> list[Published]:
    """The sink's entries, in stream order."""
    out: list[Published] = []
    last = "-"
    while True:
        page = client.xrange("out", min=last, count=10_000)
        if last != "-":
            page = page[1:]
        if not page:
            return out
        for entry_id, fields in page:
            out.append(
                Published(
                    fields[b"id"].decode(),
                    fields[b"user"].decode(),
                    int(fields[b"due_ms"]),
                    int(entry_id.split(b"-")[0]),
                )
            )
        last = page[-1][0].decode()


async def until(check: Callable[[], Awaitable[bool] | bool], timeout_s: float, what: str) -> None:
    """Poll ``check`` until it holds, under a deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:g} s"
        await asyncio.sleep(0.05)


def p99(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
