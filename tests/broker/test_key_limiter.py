"""The caps a dispatcher passes each lease call, and what it trims."""

from __future__ import annotations

from dejaq.broker.dispatch.key_limiter import KeyLimiter
from dejaq.core.key_limits import KeyLimit
from dejaq.core.model import LeasedMessage, TopicSettings

T0 = 1_000_000


def _msgs(key: str, n: int) -> list[LeasedMessage]:
    return [LeasedMessage(f"{key}-{i}", T0, b"", 2, 1, key=key) for i in range(n)]


def test_a_key_not_yet_seen_is_trimmed_to_its_share_then_named_in_the_caps() -> None:
    # Given a concurrency of 5 of which this broker's share is 2
    limiter = KeyLimiter(TopicSettings(key_concurrency=5), T0)
    limiter.begin(T0, 0.4, lambda limit: 2)
    assert limiter.caps() == {}
    # When a pass brings 4 of a new key and 3 unkeyed
    kept, over = limiter.trim(_msgs("a", 4) + _msgs("", 3))
    limiter.took(kept, T0 + 1000)
    # Then 2 of the key and every unkeyed one are kept, 2 go back
    assert [m.id for m in over] == ["a-2", "a-3"]
    assert len(kept) == 5
    # And the key is named from now on, with nothing left to take
    limiter.begin(T0 + 1, 0.4, lambda limit: 2)
    assert limiter.caps() == {"a": 0}
    assert limiter.blocked()


def test_a_released_message_makes_room_and_an_override_wins() -> None:
    settings = TopicSettings(key_concurrency=2, key_limits=(KeyLimit("vip", concurrency=4),))
    limiter = KeyLimiter(settings, T0)
    limiter.begin(T0, 1.0, lambda limit: limit)
    assert limiter.caps() == {}  # no key met yet
    kept, over = limiter.trim(_msgs("a", 3) + _msgs("vip", 5))
    assert len(over) == 2  # a's third and vip's fifth
    limiter.took(kept, T0 + 1000)
    limiter.held.released(["a-0", "vip-0"])
    assert limiter.caps() == {"a": 1, "vip": 1}


def test_a_rate_fills_its_bucket_at_the_brokers_share() -> None:
    # Given 100/s with a burst of 10, on a broker serving half the buckets
    limiter = KeyLimiter(TopicSettings(key_rate=100.0, key_burst=10), T0)
    limiter.begin(T0, 0.5, lambda limit: limit)
    kept, over = limiter.trim(_msgs("a", 20))
    limiter.took(kept, T0 + 1000)
    # Then the burst's share went (5), and a token comes every 20 ms after
    assert (len(kept), len(over)) == (5, 15)
    assert limiter.next_token_ms() == T0 + 20
    limiter.begin(T0 + 100, 0.5, lambda limit: limit)
    assert limiter.caps() == {"a": 5}


def test_no_limits_means_no_limiter_is_needed() -> None:
    assert not KeyLimiter(TopicSettings(), T0).active
    lifted = TopicSettings(key_limits=(KeyLimit("a", concurrency=0),))
    assert not KeyLimiter(lifted, T0).active
