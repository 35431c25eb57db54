"""The one back-off: its steps, its bounds and its jitter."""

from __future__ import annotations

import random

import pytest

from dejaq.core.backoff import JITTER, Backoff


def test_the_steps_double_from_the_first_up_to_the_cap() -> None:
    # Given a back-off from 50 ms capped at 1 s
    backoff = Backoff(0.05, 1.0)
    # Then its steps double, then stay at the cap, however many tries failed
    assert [backoff.step(n) for n in range(6)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]
    assert backoff.step(10_000) == 1.0


def test_each_wait_lies_between_its_step_and_half_again_within_the_cap() -> None:
    # Given a back-off in milliseconds, as a webhook's, and a seeded draw
    backoff = Backoff(100, 3_600_000)
    draw = random.Random(7).random
    for attempt in range(40):
        step = backoff.step(attempt)
        for _ in range(50):
            # When a wait is drawn after that many failed tries
            wait = backoff.delay(attempt, draw)
            # Then it is never shorter than its step before the cap, never past the cap
            if step < backoff.cap:
                assert step <= wait <= min(backoff.cap, step * (1 + JITTER))
            else:
                assert backoff.cap * (1 - JITTER) < wait <= backoff.cap


def test_the_extremes_of_the_draw_give_the_bounds() -> None:
    backoff = Backoff(0.2, 1.0)
    assert backoff.delay(0, lambda: 0.0) == 0.2
    assert backoff.delay(1, lambda: 0.999) == pytest.approx(0.4 * (1 + 0.999 * JITTER))
    assert backoff.delay(2, lambda: 0.999) == 1.0  # 0.8 and half again is past the cap
    assert backoff.delay(3, lambda: 0.0) == 1.0
    assert backoff.delay(3, lambda: 0.999) == pytest.approx(1.0 - 0.999 * JITTER)


def test_waits_after_the_same_failure_are_spread() -> None:
    # Given many clients that failed together, as many times each
    backoff = Backoff(0.05, 1.0)
    draw = random.Random(11).random
    # When each draws its wait, before the cap and at it
    for attempt in (1, 8):
        waits = {backoff.delay(attempt, draw) for _ in range(100)}
        # Then they do not try again together
        assert len(waits) == 100
        assert max(waits) - min(waits) > backoff.step(attempt) * JITTER / 2


def test_a_back_off_needs_a_positive_first_step_within_the_cap() -> None:
    for first, cap in ((0, 1.0), (-1, 1.0), (2.0, 1.0)):
        with pytest.raises(ValueError, match="first <= cap"):
            Backoff(first, cap)
