"""The broker's own wall clock, watched for steps: the clock that judges "due"
in a cluster on embedded storage, where each broker's own clock decides.

The skew guard (``clock_guard.py``) measures this broker's clock against the
others' in their heartbeats, a sample a second. A step of the wall clock (NTP,
an operator, a virtual machine resumed) would go unseen until the next
samples, and every delivery meanwhile would be early by the step. So every
reading also reads the monotonic clock, which no step moves: while the wall
clock keeps its distance to it (within ``STEP_US``: NTP slews far slower) the
reading is the wall clock; once that distance moves, the guard judges the
step at once (``ClockGuard.judge_step``). A step that keeps the clock within
the guard's bound is taken; one beyond stops dispatch, and until the guard
finds the clock back within its bound time runs on the monotonic clock from
the last distance it accepted, so what the dispatcher already holds and the
stamps of frames to consumers that hold keep to the time as measured. No
heartbeat is needed to see a step: it is seen with etcd down too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from dejaq.core.clock import Wake, clocks_us

STEP_US = 2_000  # a move of the wall clock against the monotonic one this large is a step


class StepJudge(Protocol):
    """What the clock asks of the guard (``ClockGuard``)."""

    def judge_step(self, offset_us: int) -> bool:
        """The wall clock minus the monotonic one moved to ``offset_us``: True
        when the clock may follow (dispatch goes on)."""
        ...


class GuardedClock:
    """A ``Clock``: the wall clock, held to the monotonic clock across a step
    the guard has not accepted (see the module)."""

    def __init__(self, guard: StepJudge, clocks: Callable[[], tuple[int, int]] = clocks_us) -> None:
        self._guard = guard
        self._clocks = clocks
        wall, mono = clocks()
        self._offset_us = wall - mono  # the distance last accepted

    def now_us(self) -> int:
        wall, mono = self._clocks()
        offset = wall - mono
        if abs(offset - self._offset_us) <= STEP_US or self._guard.judge_step(offset):
            self._offset_us = offset
        return mono + self._offset_us

    def now_ms(self) -> int:
        return self.now_us() // 1_000

    async def wait_until(self, at_ms: int, wake: Wake) -> None:
        delay_us = at_ms * 1_000 - self.now_us()
        if delay_us > 0:
            await wake.wait(delay_us / 1_000_000)
