"""One back-off for every retry loop: exponential, jittered, within the caller's bounds.

The steps double from ``first`` up to ``cap``. Each wait is drawn at random
between its step and half again as long (never past ``cap``); once the steps
have reached ``cap``, between half of ``cap`` and ``cap``. So many clients
that failed together (brokers losing etcd at once, consumers of a broker
that restarted) do not try again together, and no wait is shorter than its
step before the cap or longer than the cap. Units are the caller's (seconds
or milliseconds).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

JITTER = 0.5  # a wait is up to this share of its step longer (at the cap: shorter)
_MAX_EXPONENT = 62  # past it every step is the cap anyway; keeps 2**n small


@dataclass(frozen=True)
class Backoff:
    first: float  # the first step
    cap: float  # no wait is longer

    def __post_init__(self) -> None:
        if not 0 < self.first <= self.cap:
            raise ValueError(f"a back-off needs 0 < first <= cap, not {self.first}, {self.cap}")

    def step(self, attempt: int) -> float:
        """The ``attempt``-th step (0 is the first): first, 2x, 4x ..., at most ``cap``."""
        doubled: float = self.first * 2 ** min(max(attempt, 0), _MAX_EXPONENT)
        return min(self.cap, doubled)

    def delay(self, attempt: int, draw: Callable[[], float] = random.random) -> float:
        """How long to wait before the next try after ``attempt`` failed tries
        (``draw``: a number in [0, 1), the jitter)."""
        step = self.step(attempt)
        if step < self.cap:
            return min(self.cap, step * (1 + JITTER * draw()))
        return self.cap * (1 - JITTER * draw())
