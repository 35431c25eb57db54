"""When a failed webhook request is tried again."""

from __future__ import annotations

from dejaq.broker.webhooks import retry

NOW = 1_800_000_000_000


def test_the_backoff_doubles_from_the_first_delay_jittered_and_is_capped() -> None:
    # Given a webhook's first delay of 100 ms, each delay after a failed delivery
    for deliveries, step in ((1, 100), (2, 200), (3, 400), (4, 800)):
        delays = {retry.backoff_ms(100, deliveries) for _ in range(50)}
        # Then lies between its doubled step and half again as long, spread
        assert all(step <= d <= step * 3 // 2 for d in delays), (step, delays)
        assert len(delays) > 1
    # And never past the cap, however many deliveries failed
    capped = [retry.backoff_ms(1000, 200) for _ in range(50)]
    assert all(retry.MAX_DELAY_MS // 2 <= d <= retry.MAX_DELAY_MS for d in capped)


def test_retry_after_in_seconds_or_as_a_date_wins() -> None:
    assert retry.delay_ms(100, 1, "3", NOW) == 3000
    date = "Fri, 15 Jan 2027 08:00:05 GMT"  # NOW + 5 s
    assert retry.retry_after_ms(date, NOW) == 5000


def test_an_unreadable_retry_after_falls_back_to_the_backoff() -> None:
    assert 200 <= retry.delay_ms(100, 2, "soon", NOW) <= 300
    assert 200 <= retry.delay_ms(100, 2, None, NOW) <= 300
