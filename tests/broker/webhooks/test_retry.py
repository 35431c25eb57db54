"""When a failed webhook request is tried again."""

from __future__ import annotations

from dejaq.broker.webhooks import retry

NOW = 1_800_000_000_000


def test_the_backoff_doubles_from_the_first_delay_and_is_capped() -> None:
    assert [retry.backoff_ms(100, n) for n in (1, 2, 3, 4)] == [100, 200, 400, 800]
    assert retry.backoff_ms(1000, 200) == retry.MAX_DELAY_MS


def test_retry_after_in_seconds_or_as_a_date_wins() -> None:
    assert retry.delay_ms(100, 1, "3", NOW) == 3000
    date = "Fri, 15 Jan 2027 08:00:05 GMT"  # NOW + 5 s
    assert retry.retry_after_ms(date, NOW) == 5000


def test_an_unreadable_retry_after_falls_back_to_the_backoff() -> None:
    assert retry.delay_ms(100, 2, "soon", NOW) == 200
    assert retry.delay_ms(100, 2, None, NOW) == 200
