"""The baseline: a hand-rolled Redis sorted-set delay queue, on the same workloads.

What one writes in an afternoon (``redis_baseline.py`` holds its Lua): due
times as scores in one sorted set (``ZADD``), payloads in one hash (``HSET``),
and ``POP_DUE`` — ``ZRANGEBYSCORE -inf now LIMIT n``, ``ZREM``, ``HMGET`` in one
script. No versions, leases, acks or dead letters: a popped message is gone
(at-most-once). A fresh ``redis-server`` (no persistence) on loopback; the
client is ``redis.asyncio`` in this process.

- ``produce``: batches of 1 / 10 / 100 / 1000 messages as one pipeline
  (``ZADD`` + ``HSET``, no transaction), ``in_flight`` pipelines at once.
- ``memory_bytes_per_message``: Redis ``used_memory`` growth per stored message.
- ``pop``: a backlog all due, popped in batches of 1,000 until empty (the lease).
- ``end_to_end``: the poller running while the batch due now is produced.
- ``steady`` / ``burst``: the same schedules as dejaq's, consumed by a *poller*
  that runs ``POP_DUE`` (batches of 1,000, repeated while a batch comes back
  full) every ``poll_ms`` (1 ms by default). Lateness = the time the pop
  returned - the due time.
- ``idle``: the poller's own cost with nothing due — this process's CPU plus
  the server's (``INFO cpu``), as a percent of one core.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from redis.asyncio import Redis
from suite import wire
from suite.backends import Unavailable, redis_url
from suite.plan import Plan
from suite.stats import cpu, lateness_summary, rate, without_cdf

QUEUE, PAYLOADS = "bench:queue", "bench:payloads"
POP_BATCH = 1000
BATCH = 1000
DAY_MS = 24 * 3600 * 1000
KEEP_UP = 0.95


def _pop_script() -> str:
    from redis_baseline import POP_DUE  # the baseline's author owns it

    return str(POP_DUE)


async def insert(
    r: Redis, ids: Sequence[str], dues: Sequence[int], batch: int, in_flight: int, cap_s: float
) -> tuple[int, float]:
    """Store messages in pipelines of ``batch``, ``in_flight`` at once; (stored, seconds)."""
    chunks = [
        ({i: d for i, d in zip(ids[k : k + batch], dues[k : k + batch], strict=True)})
        for k in range(0, len(ids), batch)
    ]
    chunks.reverse()
    stored = 0
    start = time.perf_counter()
    deadline = start + cap_s

    async def worker() -> None:
        nonlocal stored
        while chunks and time.perf_counter() < deadline:
            scores = chunks.pop()
            pipe = r.pipeline(transaction=False)
            pipe.zadd(QUEUE, scores)  # type: ignore[arg-type]
            pipe.hset(PAYLOADS, mapping=dict.fromkeys(scores, wire.PAYLOAD))  # type: ignore[arg-type]
            await pipe.execute()
            stored += len(scores)

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return stored, time.perf_counter() - start


class Poller:
    """Runs POP_DUE every ``tick_s`` until ``expected`` messages were popped (or the deadline)."""

    def __init__(self, r: Redis, script: str, tick_s: float, due: dict[bytes, int]) -> None:
        self.pop = r.register_script(script)
        self.tick_s = tick_s
        self.due = due
        self.popped = 0
        self.calls = 0
        self.lateness: list[np.ndarray] = []
        self.last_ns = 0

    async def run(self, expected: int, seconds: float) -> bool:
        """True when ``expected`` were popped before ``seconds`` passed."""
        deadline = time.perf_counter() + seconds
        tick = time.perf_counter()
        while self.popped < expected:
            while True:
                reply = await self.pop(keys=[QUEUE, PAYLOADS], args=[wire.now_ms(), POP_BATCH])
                self.calls += 1
                if not reply:
                    break
                at_ns = time.time_ns()
                ids = reply[0]
                self.popped += len(ids)
                self.last_ns = at_ns
                dues = np.fromiter((self.due.get(i, 0) for i in ids), np.float64, len(ids))
                self.lateness.append(at_ns / 1e6 - dues)
                if len(ids) < POP_BATCH:
                    break
            if self.popped >= expected:
                break
            tick += self.tick_s
            now = time.perf_counter()
            if now > deadline:
                return False
            if tick > now:
                await asyncio.sleep(tick - now)
            else:
                tick = now
        return True

    def values(self) -> np.ndarray:
        return np.concatenate(self.lateness) if self.lateness else np.zeros(0)


class Baseline:
    def __init__(self, r: Redis, script: str, plan: Plan) -> None:
        self.r = r
        self.script = script
        self.plan = plan
        self.tick_s = plan.poll_ms / 1000
        self.produce_rate = 20_000.0

    async def produce(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for batch in self.plan.batch_sizes:
            await self.r.delete(QUEUE, PAYLOADS)
            n = self.plan.produce_counts[batch]
            far = wire.now_ms() + DAY_MS
            ids = wire.Ids().take(n)
            before = await used_memory(self.r)
            with cpu(None) as used:
                stored, seconds = await insert(
                    self.r,
                    ids,
                    [far + i % 60_000 for i in range(n)],
                    batch,
                    self.plan.in_flight,
                    self.plan.produce_cap_s,
                )
            point = out[str(batch)] = {
                "messages": stored,
                "seconds": round(seconds, 3),
                "msgs_per_s": rate(stored, seconds),
                "client_cpu_s": round(used.client_s, 2),
            }
            if batch == max(self.plan.batch_sizes):
                point["memory_bytes_per_message"] = round(
                    (await used_memory(self.r) - before) / max(stored, 1), 1
                )
                self.produce_rate = float(point["msgs_per_s"])
            print(
                f"[baseline] produce batch {batch:>4}: {point['msgs_per_s']:>9,} msgs/s", flush=True
            )
        return out

    async def pop(self) -> dict[str, Any]:
        """Lease throughput: a backlog all due, popped in batches of 1,000 in a tight loop."""
        await self.r.delete(QUEUE, PAYLOADS)
        n = self.plan.e2e_messages
        due = wire.now_ms() - 1000
        await insert(self.r, wire.Ids().take(n), [due] * n, BATCH, self.plan.in_flight, 120)
        pop = self.r.register_script(self.script)
        popped = 0
        start = time.perf_counter()
        while popped < n and (
            reply := await pop(keys=[QUEUE, PAYLOADS], args=[wire.now_ms(), POP_BATCH])
        ):
            popped += len(reply[0])
        seconds = time.perf_counter() - start
        return {
            "messages": popped,
            "seconds": round(seconds, 3),
            "msgs_per_s": rate(popped, seconds),
        }

    async def end_to_end(self) -> dict[str, Any]:
        await self.r.delete(QUEUE, PAYLOADS)
        n = self.plan.e2e_messages
        due = wire.now_ms()
        ids = wire.Ids().take(n)
        poller = Poller(
            self.r, self.script, self.tick_s, dict.fromkeys((i.encode() for i in ids), due)
        )
        start = time.perf_counter()
        polling = asyncio.create_task(poller.run(n, 120))
        await insert(self.r, ids, [due] * n, BATCH, self.plan.in_flight, 120)
        finished = await polling
        seconds = time.perf_counter() - start
        late = lateness_summary(poller.values())
        return {
            "messages": n,
            "delivered": poller.popped,
            "timed_out": not finished,
            "seconds": round(seconds, 3),
            "msgs_per_s": rate(poller.popped, seconds),
            "lateness": without_cdf(late),
        }

    async def scheduled(
        self, n: int, offsets: Callable[[int], int], span_ms: int
    ) -> dict[str, Any]:
        await self.r.delete(QUEUE, PAYLOADS)
        lead_ms = round(min(60.0, 0.5 + 1.5 * n / self.produce_rate) * 1000)
        t0 = wire.now_ms() + lead_ms
        ids = wire.Ids().take(n)
        dues = [t0 + offsets(i) for i in range(n)]
        poller = Poller(
            self.r,
            self.script,
            self.tick_s,
            {i.encode(): d for i, d in zip(ids, dues, strict=True)},
        )
        start = time.perf_counter()
        await insert(self.r, ids, dues, BATCH, self.plan.in_flight, 120)
        produce_s = time.perf_counter() - start
        produced_in_time = wire.now_ms() < t0
        wait_s = (t0 + span_ms - wire.now_ms()) / 1000 + self.plan.drain_timeout_s
        finished = await poller.run(n, max(wait_s, 1.0))
        late = lateness_summary(poller.values())
        last = poller.last_ns / 1e6 - t0 if poller.last_ns else None
        return {
            "messages": n,
            "delivered": poller.popped,
            "timed_out": not finished,
            "lead_ms": lead_ms,
            "produce_s": round(produce_s, 3),
            "produced_before_first_due": produced_in_time,
            "last_delivery_after_t0_ms": round(last, 1) if last is not None else None,
            "lag_at_end_ms": round(last - span_ms, 1) if last is not None else None,
            "pop_calls": poller.calls,
            "early": late.get("early", 0),
            "lateness": late,
        }

    async def lateness(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        span_ms = round(self.plan.steady_s * 1000)
        for per_s in self.plan.rates:
            n = max(1, round(per_s * self.plan.steady_s))
            r = out[str(per_s)] = await self.scheduled(n, functools.partial(_step, per_s), span_ms)
            after = r["last_delivery_after_t0_ms"] or 0.0
            achieved = r["delivered"] / max(after, span_ms) * 1000 if r["delivered"] else 0.0
            r["rate_per_s"] = per_s
            r["achieved_per_s"] = round(achieved)
            r["kept_up"] = r["delivered"] == n and achieved >= KEEP_UP * per_s
            late = r["lateness"]
            print(
                f"[baseline] {per_s:>6,} due/s: p50 {late.get('p50_ms')} p99 {late.get('p99_ms')}"
                f" max {late.get('max_ms')} ms, achieved {r['achieved_per_s']:,}/s",
                flush=True,
            )
        b = out["burst"] = await self.scheduled(self.plan.burst, lambda _i: 0, 0)
        drain = b["last_delivery_after_t0_ms"]
        b["drain_s"] = round(drain / 1000, 3) if drain else None
        b["drain_msgs_per_s"] = rate(b["delivered"], drain / 1000) if drain else 0
        print(f"[baseline] burst {self.plan.burst:,}: drained in {b['drain_s']} s", flush=True)
        return out

    async def idle(self) -> dict[str, Any]:
        """The poller's cost while nothing is due (the produce points' messages wait a day)."""
        await self.r.delete(QUEUE, PAYLOADS)
        n = max(self.plan.produce_counts.values())
        far = wire.now_ms() + DAY_MS
        await insert(
            self.r, wire.Ids().take(n), [far + i for i in range(n)], BATCH, self.plan.in_flight, 120
        )
        poller = Poller(self.r, self.script, self.tick_s, {})
        server0 = await server_cpu_s(self.r)
        with cpu(None) as used:
            await poller.run(1, self.plan.idle_s)  # expects 1, gets none: runs until the deadline
        server = await server_cpu_s(self.r) - server0
        return {
            "waiting": n,
            "seconds": round(used.wall_s, 2),
            "pop_calls": poller.calls,
            "client_cpu_percent": round(100 * used.client_s / used.wall_s, 2),
            "server_cpu_percent": round(100 * server / used.wall_s, 2),
            "cpu_percent": round(100 * (used.client_s + server) / used.wall_s, 2),
        }


def _step(per_s: int, i: int) -> int:
    """Message i of a steady schedule is due this many ms after the first."""
    return (i * 1000) // per_s


async def used_memory(r: Redis) -> int:
    return int((await r.info("memory"))["used_memory"])


async def server_cpu_s(r: Redis) -> float:
    info = await r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


async def run(plan: Plan, parts: Sequence[str]) -> dict[str, Any]:
    """The baseline's figures for ``parts`` (produce, end_to_end, lateness, idle)."""
    try:
        script = _pop_script()
    except Exception as exc:  # the baseline module is someone else's work in progress
        return {"skipped": f"cannot import POP_DUE from benchmarks/redis_baseline.py: {exc}"}
    out: dict[str, Any] = {"poll_ms": plan.poll_ms, "pop_batch": POP_BATCH}
    try:
        async with redis_url() as url:
            r = Redis.from_url(url)
            try:
                out["redis_version"] = (await r.info("server"))["redis_version"]
                b = Baseline(r, script, plan)
                if "produce" in parts:
                    out["produce"] = await b.produce()
                if "end_to_end" in parts:
                    out["pop"] = await b.pop()
                    out["end_to_end"] = await b.end_to_end()
                    print(
                        f"[baseline] pop {out['pop']['msgs_per_s']:,} msgs/s,"
                        f" end-to-end {out['end_to_end']['msgs_per_s']:,} msgs/s",
                        flush=True,
                    )
                if "lateness" in parts:
                    out["lateness"] = await b.lateness()
                if "idle" in parts:
                    out["idle"] = await b.idle()
                    print(f"[baseline] idle poller: {out['idle']['cpu_percent']}% CPU", flush=True)
            finally:
                await r.aclose()
    except Unavailable as exc:
        return {"skipped": str(exc)}
    return out
