"""How big each scenario is: one plan for ``--quick``, one for the full run.

Every load loop takes its count from here and also stops at a time cap, so a
slow backend makes a figure smaller, never a run endless.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BATCH_SIZES = (1, 10, 100, 1000)
RATES = (1_000, 10_000, 20_000, 50_000)  # steady due rates, messages per second
PAYLOAD_BYTES = 100
SCALE_CAP_S = 240.0  # the 10M stage is skipped when it would take longer than this
SCALE_CAP_BYTES = 12 << 30  # ... or need more broker memory than this


@dataclass(frozen=True)
class Plan:
    quick: bool
    # produce throughput by batch size: messages per point, and a time cap per point
    produce_counts: dict[int, int]
    produce_cap_s: float
    in_flight: int  # frames in flight on the one Produce stream
    # end-to-end: a batch due now, produced and consumed at once
    e2e_messages: int
    e2e_driver_messages: int  # the same through the driver's Producer / Consumer
    # steady due rates: the schedule spans this long at each rate
    rates: tuple[int, ...]
    steady_s: float
    burst: int  # messages due at the same millisecond
    credits: int  # consumer window
    drain_timeout_s: float  # after the last due time, how long to wait for stragglers
    # memory backend at scale
    scale_counts: tuple[int, ...]
    idle_s: float
    # the hand-rolled baseline's poller period
    poll_ms: float = 1.0
    batch_sizes: tuple[int, ...] = field(default=BATCH_SIZES)
    broker_env: dict[str, str] = field(default_factory=dict)  # DEJAQ_* settings for brokers


QUICK = Plan(
    quick=True,
    produce_counts={1: 2_000, 10: 10_000, 100: 40_000, 1000: 100_000},
    produce_cap_s=2.0,
    in_flight=8,
    e2e_messages=50_000,
    e2e_driver_messages=20_000,
    rates=RATES,
    steady_s=1.5,
    burst=50_000,
    credits=10_000,
    drain_timeout_s=15.0,
    scale_counts=(1_000_000,),
    idle_s=5.0,
)

FULL = Plan(
    quick=False,
    produce_counts={1: 10_000, 10: 60_000, 100: 200_000, 1000: 400_000},
    produce_cap_s=10.0,
    in_flight=8,
    e2e_messages=200_000,
    e2e_driver_messages=100_000,
    rates=RATES,
    steady_s=5.0,
    burst=100_000,
    credits=10_000,
    drain_timeout_s=30.0,
    scale_counts=(1_000_000, 10_000_000),
    idle_s=10.0,
)
