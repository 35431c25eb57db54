"""The token bucket behind a topic's rate cap, and its share in a cluster."""

from __future__ import annotations

from dejaq.broker.dispatch.rate import RateCap

T0 = 1_000_000


def test_a_share_of_the_buckets_gets_that_share_of_the_rate() -> None:
    # Given a cap of 10k/s, on a broker serving a third of the topic's buckets
    cap, share = RateCap(10_000, T0), 1 / 3
    sent = 0
    for ms in range(1, 1001):  # one pass a millisecond, for a second
        n = cap.allowed(T0 + ms, share)
        cap.spend(n)
        sent += n
    # Then it sent a third of 10k in that second (plus the first token)
    assert abs(sent - 10_000 / 3) <= 2


def test_a_quiet_topic_saves_up_ten_ms_of_tokens_at_most() -> None:
    cap = RateCap(20_000, T0)
    assert cap.allowed(T0 + 60_000, 1.0) == 200  # 10 ms at 20/ms, after a quiet minute


def test_the_next_pass_runs_when_a_token_is_in() -> None:
    cap = RateCap(100, T0)  # one every 10 ms
    cap.spend(cap.allowed(T0, 1.0))
    assert cap.next_ms(1.0) == T0 + 10
    assert cap.allowed(T0 + 9, 1.0) == 0
    assert cap.allowed(T0 + 10, 1.0) == 1


def test_no_share_means_no_deliveries_until_a_rebalance() -> None:
    cap = RateCap(100, T0)
    cap.spend(cap.allowed(T0, 0.0))
    assert cap.allowed(T0 + 5_000, 0.0) == 0
    assert cap.next_ms(0.0) == T0 + 5_000 + 1000
