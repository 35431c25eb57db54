"""The driver's retry back-off without a deadline (``dejaq consume`` reconnects
until it is interrupted): it never expires, and its waits stay within the cap."""

from __future__ import annotations

import math

from dejaq.driver.backoff import Backoff


def test_an_infinite_timeout_never_expires_and_waits_at_most_the_cap() -> None:
    # Given a back-off with no deadline, many tries along
    backoff = Backoff(math.inf)
    backoff.attempt = 10_000
    # Then it has not expired, and its next wait is no longer than the cap
    assert not backoff.expired()
    assert backoff.steps.delay(backoff.attempt) <= backoff.steps.cap
