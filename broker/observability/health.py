"""Reflect storage health into gRPC health checking (grpc.health.v1).

While storage does not answer, or the skew guard holds dispatch back (its
clock is too far from the cluster's: broker/clock/guard.py), the broker
reports NOT_SERVING (and logs it once); when both are well again, SERVING.
Requests meanwhile get UNAVAILABLE from the storage layer, and the
dispatchers retry on their own. The ``liveness`` service answers SERVING for
as long as the broker runs (until its graceful stop), for a kubelet's
liveness probe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from grpc_health.v1 import health_pb2

from dejaq.broker.observability.metrics import Metrics
from dejaq.broker.tasks import pause
from dejaq.storage_plugins.base import Storage

log = logging.getLogger(__name__)
SERVICES = ("", "dejaq.v1.Timeline")
# For a liveness probe: SERVING while the broker runs, whatever storage does, so
# a storage outage takes brokers out of rotation (readiness) without restarts.
LIVENESS = "liveness"
CHECK_TIMEOUT_S = 2.0


async def set_status(servicer: Any, serving: bool) -> None:
    status = (
        health_pb2.HealthCheckResponse.SERVING
        if serving
        else health_pb2.HealthCheckResponse.NOT_SERVING
    )
    for name in SERVICES:
        await servicer.set(name, status)


async def set_alive(servicer: Any) -> None:
    await servicer.set(LIVENESS, health_pb2.HealthCheckResponse.SERVING)


async def storage_healthy(storage: Storage) -> bool:
    try:
        return await asyncio.wait_for(storage.healthy(), CHECK_TIMEOUT_S)
    except Exception:  # any failure to answer is "unhealthy"
        return False


async def monitor(
    storage: Storage,
    servicer: Any,
    metrics: Metrics,
    interval_s: float = 1.0,
    clock_ok: Callable[[], bool] = lambda: True,
    serving: bool = True,
) -> None:
    """Judge every ``interval_s``; ``serving``: the status set at start."""
    while True:
        await pause(interval_s)
        ok = await storage_healthy(storage)
        metrics.storage_up.set(1 if ok else 0)
        timely = clock_ok()
        if (ok and timely) != serving:
            serving = ok and timely
            if serving:
                log.info("storage answers and the clock is in bounds: serving")
            elif not ok:
                log.error("storage does not answer: reporting NOT_SERVING")
            else:
                log.error("the clock guard holds dispatch back: reporting NOT_SERVING")
            await set_status(servicer, serving)
