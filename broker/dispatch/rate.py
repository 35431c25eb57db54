"""A topic's delivery rate cap (``TopicSettings.max_rate``), as one broker applies it.

The cap is for the whole cluster. Each broker leases only from the buckets its
consumers own, and those are disjoint, so each takes the share of the cap that
its buckets are of the topic's: with 64 buckets split 22/21/21 over three
brokers a cap of 20k/s becomes 6,875 + 6,562 + 6,562 a second. Due messages are
spread over the buckets by a hash of their id, so each broker's share of a
backlog matches its share of the cap. There is no cross-broker traffic per pass.

Within a broker it is a token bucket refilled at the share's rate by the
dispatcher's clock. It holds at most ``BURST_S`` worth of tokens, so a topic
that was quiet cannot start a burst with more than that, and a backlog drains
at an even pace: a pass takes what the tokens allow, and the next pass runs when
one more token has come in.
"""

from __future__ import annotations

import math

BURST_S = 0.01  # tokens kept at most: 10 ms of the rate (at least one)


class RateCap:
    """Deliveries allowed a second for one topic on one broker (a share of the cap)."""

    __slots__ = ("_at_ms", "_tokens", "rate")

    def __init__(self, rate: float, now_ms: int) -> None:
        self.rate = rate  # the whole cluster's cap, deliveries a second
        self._tokens = 1.0
        self._at_ms = now_ms

    def allowed(self, now_ms: int, share: float) -> int:
        """How many deliveries may go out now (whole tokens), at ``share`` of the cap."""
        per_ms = self.rate * share / 1000
        if now_ms > self._at_ms:
            burst = max(1.0, per_ms * BURST_S * 1000)
            self._tokens = min(burst, self._tokens + (now_ms - self._at_ms) * per_ms)
            self._at_ms = now_ms
        return int(self._tokens)

    def spend(self, n: int) -> None:
        self._tokens -= n

    def next_ms(self, share: float) -> int:
        """The millisecond at which the next whole token is in."""
        per_ms = self.rate * share / 1000
        if per_ms <= 0:
            return self._at_ms + 1000  # no share now: look again after a rebalance or a second
        missing = 1.0 - self._tokens
        return self._at_ms + max(1, math.ceil(missing / per_ms))
