"""How big each scenario is: the full plan, and the smoke plan CI runs.

Every load loop takes its count from here and also stops at a time bound, so a
slow backend makes a figure smaller, never a run endless. ``--step-s``,
``--rates`` and friends on the command line replace single fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PAYLOAD_BYTES = 100
BATCH_SIZES = (1, 10, 100, 1000)


@dataclass(frozen=True)
class Plan:
    smoke: bool
    # steady: due rates stepped up (msgs/s), each held step_s seconds
    rates: tuple[int, ...]
    step_s: float
    consumers: int  # consumer processes (the poller runs as many)
    p99_ms: float  # a step holds when p99 lateness <= this (and 0 early, 0 left behind)
    lead_ms: int  # the producer schedules this far ahead of due
    drain_s: float  # after the last due time, how long stragglers may take
    # cli: 3 x `dejaq consume` at cli_rate; one `dejaq consume` at cli_rates
    cli_rate: int
    cli_consumers: int
    cli_rates: tuple[int, ...]
    cli_step_s: float
    # bulk: messages due now, produce -> deliver -> ack through the driver (memory)
    bulk_messages: int
    bulk_consumers: int
    # burst: messages due at one millisecond, drained with the topic's rate cap
    # (burst_rate msgs/s) and without one
    burst_messages: int
    burst_rate: int
    # produce: msgs/s by batch size through Producer.send_batch
    produce_counts: dict[int, int]
    produce_cap_s: float
    in_flight: int
    # scale (memory): waiting messages, idle CPU
    scale_counts: tuple[int, ...]
    idle_s: float
    # wire limit (private client, not a product figure)
    wire_messages: int
    # priority: one message at a time at priority_rate/s for priority_s seconds
    # (produce-to-receive latency, idle consumers); a backlog of priority_backlog
    # received in priority order; priorities 0 .. priority_levels - 1
    # forecast: waiting messages per backend (memory apart), topics of the refresh figure
    forecast_counts: tuple[int, ...] = (1_000_000,)
    forecast_counts_memory: tuple[int, ...] = (1_000_000, 10_000_000)
    forecast_topics: int = 100
    priority_rate: int = 200
    priority_s: float = 20.0
    priority_backlog: int = 10_000
    priority_levels: int = 10
    # scan: topics of these sizes read back bucket by bucket through
    # Admin.scan_bucket, pages of scan_page
    scan_counts: tuple[int, ...] = (20_000, 1_000_000)
    scan_page: int = 1_000
    # webhooks (memory): due rates stepped up, each held webhook_step_s, posted to a
    # sink process with webhook_concurrency requests in flight
    webhook_rates: tuple[int, ...] = (500, 1_000, 2_000, 5_000, 10_000, 15_000, 20_000)
    webhook_step_s: float = 5.0
    webhook_concurrency: int = 64
    # cpu: one step at cpu_rate held cpu_step_s; each process's CPU a delivered
    # message over its middle half
    cpu_rate: int = 20_000
    cpu_step_s: float = 20.0
    # fairness: a campaign of fair_messages (served backends: fair_messages_served)
    # due at one ms beside fair_keys keys of fair_key_rate msgs/s for fair_s seconds
    fair_messages: int = 1_000_000
    fair_messages_served: int = 200_000
    fair_keys: int = 100
    fair_key_rate: float = 10.0
    fair_s: float = 30.0
    # fairness and burst: how far ahead of the load's due time it is produced,
    # beyond the time producing it takes (fairness ~20k/s, burst ~50k/s at worst)
    fair_margin_ms: int = 3_000
    burst_margin_ms: int = 2_000
    steady_keys: int = 0  # steady: messages keyed round this many keys (0: none)
    steady_headers: int = 0  # steady: small headers on each message (0: none)
    poll_ms: float = 1.0  # the Redis poller's period
    credits: int = 10_000  # the private client's window
    broker_env: dict[str, str] = field(default_factory=dict)  # DEJAQ_* settings for brokers

    @property
    def enforce_speed(self) -> bool:
        """Smoke runs check that figures exist and nothing is lost or early, not speed."""
        return not self.smoke


FULL = Plan(
    smoke=False,
    rates=(2_000, 5_000, 10_000, 20_000, 30_000, 40_000, 60_000, 80_000, 100_000),
    step_s=20.0,
    consumers=3,
    p99_ms=10.0,
    lead_ms=1000,
    drain_s=15.0,
    cli_rate=1_000,
    cli_consumers=3,
    cli_rates=(1_000, 5_000, 10_000, 20_000, 30_000, 40_000),
    cli_step_s=10.0,
    bulk_messages=200_000,
    bulk_consumers=1,
    burst_messages=100_000,
    burst_rate=20_000,
    produce_counts={1: 10_000, 10: 60_000, 100: 200_000, 1000: 400_000},
    produce_cap_s=10.0,
    in_flight=8,
    scale_counts=(1_000_000, 10_000_000),
    idle_s=10.0,
    wire_messages=200_000,
)

SMOKE = Plan(
    smoke=True,
    rates=(1_000, 3_000),
    step_s=1.0,
    consumers=3,
    p99_ms=10.0,
    lead_ms=500,
    drain_s=8.0,
    cli_rate=1_000,
    cli_consumers=3,
    cli_rates=(2_000,),
    cli_step_s=1.0,
    bulk_messages=5_000,
    bulk_consumers=1,
    burst_messages=4_000,
    burst_rate=4_000,
    produce_counts={1: 200, 10: 1_000, 100: 5_000, 1000: 10_000},
    produce_cap_s=1.0,
    in_flight=8,
    scale_counts=(20_000,),
    idle_s=1.0,
    wire_messages=5_000,
    priority_rate=200,
    priority_s=1.0,
    priority_backlog=500,
    scan_counts=(2_000,),
    forecast_counts=(5_000,),
    forecast_counts_memory=(5_000,),
    forecast_topics=5,
    webhook_rates=(200, 500),
    webhook_step_s=1.0,
    cpu_rate=2_000,
    cpu_step_s=2.0,
    fair_messages=5_000,
    fair_messages_served=5_000,
    fair_keys=10,
    fair_s=3.0,
    # a smoke load of ~5k messages is produced in well under 0.5 s
    fair_margin_ms=1_500,
    burst_margin_ms=1_000,
)
