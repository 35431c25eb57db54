"""The rival on the steady ramp: the hand-rolled Redis sorted-set queue (``suite/rival.py``).

A fresh ``redis-server``; the same producer process and schedule, writing
ZADD + HSET pipelines; as many poller processes as dejaq gets consumer
processes, each running POP_DUE every ``poll_ms`` (1 ms) and acking with
ZREM + HDEL. Same steps, same rule, so each backend's figure reads as a ratio
to this one, measured in the same run on the same machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from suite.backends import Store, redis_store
from suite.fleets import WorkerFleet
from suite.plan import Plan
from suite.probes import RedisProbe
from suite.ramp import Rig, ramp
from suite.workers import Worker, poller_main, producer_main

from .steady import rule


@contextlib.asynccontextmanager
async def rig(plan: Plan) -> AsyncIterator[tuple[Rig, Store]]:
    """A fresh redis-server, the producer process and the pollers, while the block runs."""
    async with redis_store() as served:
        url = served.url
        producer = Worker("poller-producer", producer_main, "zset", url, plan.in_flight)
        try:
            await producer.ready()
            fleet = await WorkerFleet(
                "poller", plan.consumers, poller_main, url, plan.poll_ms
            ).start()
            try:
                yield Rig("poller", producer, fleet, RedisProbe(url)), served
            finally:
                await fleet.stop()
        finally:
            await producer.stop()


async def run(plan: Plan) -> dict[str, Any]:
    async with rig(plan) as (load, _):
        out = await ramp(load, plan.rates, plan.step_s, plan.lead_ms, plan.drain_s, rule(plan))
    return {"processes": plan.consumers, "poll_ms": plan.poll_ms, "step_s": plan.step_s, **out}
