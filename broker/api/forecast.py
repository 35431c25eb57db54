"""The Forecast call: a topic's waiting messages counted in due-time bins ahead.

The bins run from the broker's now (the clock that decides what is due) in
steps of ``step_ms`` up to ``horizon_ms``, rounded up to whole steps so the
whole horizon is covered. Both default when 0 (an hour of one-minute bins);
a negative value, or more than ``MAX_FORECAST_BINS`` bins, is refused.
"""

from __future__ import annotations

from dejaq.broker.context import BrokerContext
from dejaq.core.errors import InvalidArgument
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins.base import MAX_FORECAST_BINS

DEFAULT_HORIZON_MS = 3_600_000
DEFAULT_STEP_MS = 60_000


def bins_of(horizon_ms: int, step_ms: int) -> tuple[int, int]:
    """(step, bins) for a request's horizon and step (0: the defaults)."""
    horizon = horizon_ms or DEFAULT_HORIZON_MS
    step = step_ms or DEFAULT_STEP_MS
    if horizon < 0 or step < 0:
        raise InvalidArgument(
            f"forecast horizon and step must be positive, not {horizon_ms} ms and {step_ms} ms"
        )
    bins = -(-horizon // step)
    if bins > MAX_FORECAST_BINS:
        raise InvalidArgument(
            f"a forecast of {horizon} ms in steps of {step} ms has {bins} bins;"
            f" at most {MAX_FORECAST_BINS}: widen the step or shorten the horizon"
        )
    return step, bins


async def forecast(broker: BrokerContext, req: pb.ForecastRequest) -> pb.ForecastResponse:
    step, bins = bins_of(req.horizon_ms, req.step_ms)
    topic = await broker.topics.get(req.topic)
    now = broker.clock.now_ms()
    counts = await broker.storage.forecast(topic.name, now, step, bins)
    return pb.ForecastResponse(start_ms=now, step_ms=step, counts=counts)
