"""The skew guard: in a cluster on embedded storage, a broker whose clock is off
stops dispatching.

SQLite (a file several brokers share over etcd) has no clock of its own, so
each broker's wall clock judges "due" and lease expiry, and a broker ahead of
the others would deliver early and take messages whose leases another broker
still holds. Each broker hears the others' clocks in their heartbeats
(``cluster/skew.py``); the guard compares its own clock with the cluster's
*median* clock (its own included; of two middle ones, the earlier): past
``bound_ms`` it stops leasing (its
dispatchers see no buckets), says so in its log, the
``dejaq_clock_guard_paused`` gauge and gRPC health (NOT_SERVING), and resumes
once it is back within the bound. While stopped it serves no consumer: it ends
their streams and refuses new ones with UNAVAILABLE, so they move to a broker
that dispatches (``broker/api/consume.py``). The median lets the majority decide: with
three brokers, the one that is off stops and the two that agree go on. With
two, the one ahead stops (the earlier middle clock is the safe side: it
delivers late, never early). A broker behind stops too: the leases it grants
would end, by the others' clocks, before its consumers expect.

Until it has heard every other broker's clock once the guard keeps a broker
that just joined from dispatching (a heartbeat comes within a second); after
``GRACE_S`` without (etcd went away meanwhile) it judges by the clocks it has
heard, if any.

Its own clock stepped: the skews are measured against this broker's monotonic
clock (``cluster/skew.py``), so a step of its wall clock moves them all at
once, without waiting for heartbeats (etcd may be down). Between two
judgements the clock that decides (``clock/guarded.py``) sees a step at its
next reading and has the guard judge it there and then (``judge_step``): the
deviation measured, moved by the step.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable

from dejaq.broker.coordination import ClusterView
from dejaq.broker.tasks import pause
from dejaq.core.clock import clocks_us

log = logging.getLogger(__name__)
GRACE_S = 3.0  # heartbeats come every second: three missed ones


class ClockGuard:
    """Whether this broker's clock is close enough to the cluster's to dispatch."""

    def __init__(
        self,
        bound_ms: int,
        grace_s: float = GRACE_S,
        clocks: Callable[[], tuple[int, int]] = clocks_us,
    ) -> None:
        self.bound_ms = bound_ms
        self._clocks = clocks
        self._wait_until = time.monotonic() + grace_s
        self.paused = True  # until the other brokers' clocks are known
        self.deviation_ms: int | None = None  # ours minus the cluster's median; None = unknown
        self._offset_us = 0  # our wall clock minus our monotonic one when deviation_ms was judged
        # Told of every change of ``paused`` (the broker stops or wakes its dispatchers).
        self.on_change: Callable[[bool], None] | None = None

    def update(self, view: ClusterView) -> bool:
        """Judge again from the brokers' skews in ``view``; True when ``paused`` changed."""
        others = [b.skew_ms for b in view.brokers if b.id != view.broker]
        known = [s for s in others if s is not None]
        first = self.deviation_ms is None
        if first and len(known) < len(others) and time.monotonic() < self._wait_until:
            return False  # not heard from everyone yet: stay paused
        wall, mono = self._clocks()
        self._offset_us = wall - mono
        # skew = their clock - ours, so the median clock - ours is the median skew
        # (our own counted as 0), and ours - the median is its negation.
        return self._judge(-int(statistics.median_low([0, *known])))

    def judge_step(self, offset_us: int) -> bool:
        """Our wall clock minus our monotonic one is now ``offset_us``: judge the
        deviation measured, moved by as much, at once; True when within the bound."""
        if self.deviation_ms is None:
            return False  # not measured yet: dispatch has not started
        moved_ms = (offset_us - self._offset_us) // 1_000
        self._offset_us += moved_ms * 1_000  # what is left of a ms counts next time
        self._judge(self.deviation_ms + moved_ms)
        return not self.paused

    @property
    def stopped(self) -> bool:
        """Judged, and found too far off: paused for its clock, not while it
        waits at start-up to hear the others'."""
        return self.paused and self.deviation_ms is not None

    def _judge(self, deviation_ms: int) -> bool:
        """Stop or go by ``deviation_ms``; True when ``paused`` changed (the
        first judgement also tells ``on_change`` when it stops the broker)."""
        first = self.deviation_ms is None
        self.deviation_ms = deviation_ms
        paused = abs(deviation_ms) > self.bound_ms
        if paused == self.paused and not (first and paused):
            return False
        changed = paused != self.paused
        self.paused = paused
        if paused:
            log.error(
                "clock guard: this broker's clock is %+d ms from the cluster's (bound %d ms):"
                " dispatch stopped until it is back within the bound; synchronise the clocks"
                " (NTP)",
                self.deviation_ms,
                self.bound_ms,
            )
        else:
            log.warning(
                "clock guard: this broker's clock is within %d ms of the cluster's (%+d ms):"
                " dispatching",
                self.bound_ms,
                self.deviation_ms,
            )
        if self.on_change is not None:
            self.on_change(paused)
        return changed


async def guard_forever(
    guard: ClockGuard, view: Callable[[], ClusterView], interval_s: float = 0.2
) -> None:
    """Judge every ``interval_s`` (``guard.on_change`` hears of every change)."""
    while True:
        guard.update(view())
        await pause(interval_s)
