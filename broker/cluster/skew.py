"""Clock skew between brokers, estimated from the wall clock in their heartbeats.

On embedded storage "due" is judged by each broker's own clock, so brokers
whose clocks disagree deliver the same message at different instants: the
skew is an error bound on "never early", and ``broker/clock/guard.py`` stops a
broker too far off. (On Redis and PostgreSQL the storage server's clock
decides: ``broker/clock/storage_clock.py``.) Each heartbeat carries the
writer's wall clock; when a broker receives it through the watch,
``their clock - our clock at receipt`` is the true offset minus the transit
delay (etcd write + watch, a few ms on a LAN).
The delay is never negative, so the largest recent sample is the best
estimate, within the smallest transit delay seen.

A sample is kept against our *monotonic* clock (their clock minus our
monotonic clock at receipt), and the estimate reads our wall clock's distance
to it when asked. So when our own wall clock is stepped, every estimate moves
by the step at once, with no new heartbeat (etcd may be down), rather than
once the samples from before the step have aged out of the window.

A peer's own clock stepped back leaves its samples from before the step too
high, and the largest would stand for the whole window: a peer stepped ahead
and back would still look ahead, and with it the median. So a sample more than
``STEP_BACK_MS`` below the estimate starts the window again. A heartbeat that
was only slow does the same, for a heartbeat: it makes the peer look behind,
which can only hold this broker back (late, never early).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable

from dejaq.core.clock import clocks_us

log = logging.getLogger(__name__)
WINDOW = 10  # heartbeats kept per broker
STEP_BACK_MS = 20  # a sample this far below the estimate: the peer's clock stepped back


class SkewTracker:
    """Each other broker's clock minus ours, from its last ``WINDOW`` heartbeats;
    warns once when it goes beyond ``warn_ms`` (and notes when it is back)."""

    def __init__(self, warn_ms: int, clocks: Callable[[], tuple[int, int]] = clocks_us) -> None:
        self.warn_ms = warn_ms
        self._clocks = clocks  # our wall and monotonic clocks (µs)
        # Their clock minus our monotonic clock (µs), a sample a heartbeat.
        self._samples: dict[str, deque[int]] = {}
        self._warned: set[str] = set()

    def _offset_us(self) -> int:
        """Our wall clock minus our monotonic clock, now."""
        wall, mono = self._clocks()
        return wall - mono

    def observe(self, broker: str, their_wall_ms: int, received_ms: int) -> int:
        """Record a heartbeat received at ``received_ms`` (our wall clock, just
        read); the new estimate of ``broker``'s clock minus ours."""
        offset = self._offset_us()
        samples = self._samples.setdefault(broker, deque(maxlen=WINDOW))
        sample = (their_wall_ms - received_ms) * 1_000 + offset
        if samples and sample < max(samples) - STEP_BACK_MS * 1_000:
            samples.clear()
        samples.append(sample)
        skew = _ms(max(samples) - offset)
        if abs(skew) > self.warn_ms and broker not in self._warned:
            self._warned.add(broker)
            log.warning(
                "clock skew: broker %s is %+d ms from this broker (warning above %d ms);"
                " 'never early' only holds within the skew: synchronise the clocks (NTP)",
                broker,
                skew,
                self.warn_ms,
            )
        elif abs(skew) <= self.warn_ms and broker in self._warned:
            self._warned.discard(broker)
            log.info(
                "clock skew: broker %s is back within %d ms (%+d ms)", broker, self.warn_ms, skew
            )
        return skew

    def skew_ms(self, broker: str) -> int | None:
        """The estimate for ``broker``, or None before its first heartbeat."""
        samples = self._samples.get(broker)
        return _ms(max(samples) - self._offset_us()) if samples else None

    def all(self) -> dict[str, int]:
        """The estimate for every broker heard from."""
        offset = self._offset_us()
        return {b: _ms(max(s) - offset) for b, s in self._samples.items() if s}

    def forget(self, broker: str) -> None:
        """The broker left: drop its samples."""
        self._samples.pop(broker, None)
        self._warned.discard(broker)


def _ms(us: int) -> int:
    return round(us / 1_000)
