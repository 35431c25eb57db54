"""dejaq's RedisStorage against the hand-rolled alternative: a plain Redis delay queue.

The baseline is what one writes in an afternoon: a sorted set of ids scored by
due time, payloads in one hash, and a Lua "pop due" script
(ZRANGEBYSCORE -inf now LIMIT n, ZREM, HMGET). It has no versions, no leases
(a popped message is gone: at-most-once), no dead letters, no buckets.

Both run in this process against one fresh ``redis-server`` on a free loopback
port (no persistence), storage level, no broker:

- insert: N messages (default 100,000; 100-byte payloads, 26-character ids,
  due times spread over the last hour) in batches of 1,000. Baseline: one
  pipeline of ZADD + HSET per batch. dejaq: ``RedisStorage.insert``.
- lease due: all N popped / leased in batches of 100 until none is left.
  dejaq leases (at-least-once: each message is kept, owned, versioned) and
  also leases at-most-once (``max_deliveries=1``: deleted on delivery, which is
  what the baseline's pop does).
- memory: the server's ``used_memory`` growth per stored message.

dejaq runs with 1 bucket (one sorted set, as the baseline) and with 64 (the
default: the cross-bucket merge costs a peek round trip per lease). Ratios are
dejaq / baseline throughput (1.0 = as fast). Saved to
``benchmarks/results/redis_baseline.json``.

    python benchmarks/redis_baseline.py [--messages N] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import random
import shutil
import socket
import string
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from common import save
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError

from dejaq.core.buckets import bucket_of
from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis.storage import RedisStorage

INSERT_BATCH = 1000
LEASE_BATCH = 100
LARGE_LEASE_BATCH = 1000  # the broker's default frame: leases of up to 1,000
PAYLOAD_BYTES = 100
SPREAD_MS = 3_600_000
START_TIMEOUT_S = 10.0
BUCKETS = (1, 64)

POP_DUE = """
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #ids == 0 then return {} end
redis.call('ZREM', KEYS[1], unpack(ids))
return {ids, redis.call('HMGET', KEYS[2], unpack(ids))}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextlib.asynccontextmanager
async def redis_server() -> AsyncIterator[str]:
    """A fresh ``redis-server`` on a free port while the block runs; its URL."""
    binary = shutil.which("redis-server")
    if binary is None:
        raise SystemExit("redis-server is not installed (not on PATH)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="dejaq-bench-redis-") as folder:
        proc = await asyncio.create_subprocess_exec(
            binary,
            *("--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"),
            *("--dir", folder),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        try:
            client = Redis.from_url(url)
            deadline = time.monotonic() + START_TIMEOUT_S
            while True:  # poll PING under a deadline
                try:
                    await client.ping()
                    break
                except RedisConnectionError:
                    pass
                if time.monotonic() > deadline or proc.returncode is not None:
                    raise SystemExit("redis-server did not answer PING")
                await asyncio.sleep(0.01)
            await client.aclose()
            yield url
        finally:
            proc.kill()
            await proc.wait()


def workload(n: int, now: int) -> list[tuple[str, int, bytes]]:
    """(id, due timestamp, payload): due over the last hour, in random order."""
    rng = random.Random(42)
    alphabet = string.ascii_uppercase + string.digits
    payload = bytes(rng.randrange(256) for _ in range(PAYLOAD_BYTES))
    return [
        ("".join(rng.choices(alphabet, k=26)), now - rng.randrange(SPREAD_MS), payload)
        for _ in range(n)
    ]


@dataclass(frozen=True)
class Reading:
    wall_s: float
    client_cpu_s: float  # this process: the Python client
    server_cpu_s: float  # redis-server, from INFO cpu


async def read_clocks(client: Redis) -> Reading:
    info = await client.info("cpu")
    server = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return Reading(time.perf_counter(), time.process_time(), server)


async def measure(client: Redis, count: int, phase: Callable[[], Awaitable[int]]) -> dict[str, Any]:
    """Run ``phase`` (which returns how many messages it handled, to check ``count``).

    Wall-clock throughput varies with whatever else runs on the machine; CPU
    time per message (client and server) much less, so both are recorded.
    """
    before = await read_clocks(client)
    handled = await phase()
    after = await read_clocks(client)
    assert handled == count, (handled, count)
    wall = after.wall_s - before.wall_s
    return {
        "msgs_per_s": round(count / wall),
        "client_cpu_us_per_msg": round((after.client_cpu_s - before.client_cpu_s) / count * 1e6, 2),
        "server_cpu_us_per_msg": round((after.server_cpu_s - before.server_cpu_s) / count * 1e6, 2),
    }


async def used_memory(client: Redis) -> int:
    info = await client.info("memory")
    return int(info["used_memory"])


async def baseline(
    client: Redis, messages: Sequence[tuple[str, int, bytes]], now: int
) -> dict[str, Any]:
    await client.flushall()
    pop = client.register_script(POP_DUE)

    async def insert() -> int:
        for start in range(0, len(messages), INSERT_BATCH):
            batch = messages[start : start + INSERT_BATCH]
            pipe = client.pipeline(transaction=False)
            pipe.zadd("queue", {id: ts for id, ts, _ in batch})
            pipe.hset("payloads", mapping={id: payload for id, _, payload in batch})
            await pipe.execute()
        return len(messages)

    async def pop_due(batch: int) -> int:
        popped = 0
        while reply := await pop(keys=["queue", "payloads"], args=[now, batch]):
            popped += len(reply[0])
        return popped

    memory = await used_memory(client)
    results: dict[str, Any] = {"insert": await measure(client, len(messages), insert)}
    results["memory_bytes_per_msg"] = round((await used_memory(client) - memory) / len(messages))
    results["lease"] = await measure(client, len(messages), lambda: pop_due(LEASE_BATCH))
    await insert()
    results["lease_batch_1000"] = await measure(
        client, len(messages), lambda: pop_due(LARGE_LEASE_BATCH)
    )
    return results


async def dejaq(
    client: Redis, url: str, messages: Sequence[tuple[str, int, bytes]], now: int, buckets: int
) -> dict[str, Any]:
    await client.flushall()
    storage = RedisStorage(url)
    await storage.open()
    topic = Topic("bench", TopicSettings(buckets=buckets))
    new = [NewMessage(id, ts, payload, bucket_of(id, buckets)) for id, ts, payload in messages]

    async def insert() -> int:
        for start in range(0, len(new), INSERT_BATCH):
            await storage.insert(topic.name, new[start : start + INSERT_BATCH])
        return len(new)

    async def lease(max_deliveries: int, batch: int = LEASE_BATCH) -> int:
        leased = 0
        while True:
            leases = await storage.lease(
                LeaseRequest.of(topic.name, None, now, batch, SPREAD_MS, "bench", max_deliveries)
            )
            if not leases.delivered:
                return leased
            leased += len(leases.delivered)

    try:
        await storage.create_topic(topic)
        memory = await used_memory(client)
        results: dict[str, Any] = {"insert": await measure(client, len(new), insert)}
        results["memory_bytes_per_msg"] = round((await used_memory(client) - memory) / len(new))
        results["lease"] = await measure(client, len(new), lambda: lease(0))
        # The leased ones are due an hour ahead now: start again for each variant.
        for phase, max_deliveries, batch in (
            ("lease_at_most_once", 1, LEASE_BATCH),
            ("lease_batch_1000", 0, LARGE_LEASE_BATCH),
        ):
            await storage.delete_topic(topic.name)
            await storage.create_topic(topic)
            await insert()
            phase_run = functools.partial(lease, max_deliveries, batch)
            results[phase] = await measure(client, len(new), phase_run)
        return results
    finally:
        await storage.close()


def ratios(ours: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """dejaq / baseline: throughput (1.0 = as fast) and CPU per message (1.0 = as cheap)."""

    def cpu(figures: dict[str, Any]) -> float:
        return float(figures["client_cpu_us_per_msg"] + figures["server_cpu_us_per_msg"])

    out: dict[str, Any] = {}
    for phase, theirs in (
        ("insert", "insert"),
        ("lease", "lease"),
        ("lease_at_most_once", "lease"),
        ("lease_batch_1000", "lease_batch_1000"),
    ):
        out[phase] = {
            "throughput": round(ours[phase]["msgs_per_s"] / base[theirs]["msgs_per_s"], 3),
            "cpu_per_msg": round(cpu(ours[phase]) / cpu(base[theirs]), 2),
        }
    out["memory_per_msg"] = round(ours["memory_bytes_per_msg"] / base["memory_bytes_per_msg"], 2)
    return out


async def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--messages", type=int, help="messages per phase (default 100000, quick 20000)")
    p.add_argument("--quick", action="store_true", help="20,000 messages: a run of a few seconds")
    args = p.parse_args(argv)
    n = args.messages or (20_000 if args.quick else 100_000)
    now = time.time_ns() // 1_000_000
    messages = workload(n, now)
    results: dict[str, Any] = {
        "config": {
            "messages": n,
            "insert_batch": INSERT_BATCH,
            "lease_batch": LEASE_BATCH,
            "large_lease_batch": LARGE_LEASE_BATCH,
            "payload_bytes": PAYLOAD_BYTES,
        }
    }
    results["config"]["load_average_1min_before"] = round(os.getloadavg()[0], 2)
    async with redis_server() as url:
        client = Redis.from_url(url)
        try:
            results["config"]["redis_version"] = (await client.info("server"))["redis_version"]
            base = results["baseline"] = await baseline(client, messages, now)
            for buckets in BUCKETS:
                ours = await dejaq(client, url, messages, now, buckets)
                results[f"dejaq_{buckets}_buckets"] = ours
                results[f"ratio_{buckets}_buckets"] = ratios(ours, base)
        finally:
            await client.aclose()
    results["config"]["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    save("redis_baseline", results)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
