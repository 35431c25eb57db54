"""Each broker's share of a concurrency limit per key: whole numbers by largest
remainder of the buckets, summing to the limit, alike on every broker."""

from __future__ import annotations

import pytest

from dejaq.broker.cluster.assignment import assign
from dejaq.core.key_shares import bucket_counts, concurrency_share


def _shares(limit: int, counts: dict[str, int]) -> dict[str, int]:
    return {b: concurrency_share(limit, counts, b) for b in counts}


def test_the_shares_of_64_buckets_over_three_brokers_sum_to_the_limit() -> None:
    # Given 64 buckets split 22/21/21 (the assignment's contiguous ranges)
    counts = {"b1": 22, "b2": 21, "b3": 21}
    # When a concurrency of 5 is shared: 5*22/64 = 1.72, 5*21/64 = 1.64 twice
    shares = _shares(5, counts)
    # Then the floors 1/1/1 get the two leftovers by largest remainder (b1, then b2 by id)
    assert shares == {"b1": 2, "b2": 2, "b3": 1}
    assert sum(shares.values()) == 5


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 7, 100, 1001])
@pytest.mark.parametrize("consumers", [1, 2, 3, 5, 9])
def test_shares_always_sum_to_the_limit(limit: int, consumers: int) -> None:
    members = [(f"broker-{i % 3}", f"c{i}") for i in range(consumers)]
    owners = [(b, len(r)) for (b, _), r in assign(members, 64).items()]
    counts = bucket_counts(owners)
    assert sum(_shares(limit, counts).values()) == limit


def test_a_limit_below_the_brokers_gives_some_brokers_none() -> None:
    shares = _shares(2, {"b1": 22, "b2": 21, "b3": 21})
    assert sorted(shares.values()) == [0, 1, 1]


def test_a_broker_without_buckets_gets_none_and_alone_one_gets_it_all() -> None:
    assert concurrency_share(5, {"b1": 64}, "b2") == 0
    assert concurrency_share(5, {"b1": 64}, "b1") == 5
    assert concurrency_share(5, {}, "b1") == 5  # no consumers known: a single broker


def test_bucket_counts_add_up_each_brokers_consumers() -> None:
    assert bucket_counts([("b1", 10), ("b2", 5), ("b1", 3)]) == {"b1": 13, "b2": 5}
