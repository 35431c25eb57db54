"""The deterministic bucket assignment, and the membership view it is computed from."""

from __future__ import annotations

import itertools
import random

import pytest

from dejaq.broker.cluster.assignment import as_ranges, assign, owned_by
from dejaq.broker.cluster.membership import BrokerInfo, Membership

BROKERS = ["10.0.0.1:7700", "10.0.0.2:7700", "10.0.0.3:7700"]


def members(n: int) -> list[tuple[str, str]]:
    return [(BROKERS[i % 3], f"c{i}") for i in range(n)]


@pytest.mark.parametrize(("n", "buckets"), [(1, 64), (2, 64), (3, 64), (7, 64), (5, 3), (64, 64)])
def test_shares_are_disjoint_covering_and_balanced(n: int, buckets: int) -> None:
    shares = assign(members(n), buckets)
    owned = [b for share in shares.values() for b in share]
    assert sorted(owned) == list(range(buckets))  # every bucket exactly once
    sizes = [len(share) for share in shares.values()]
    assert max(sizes) - min(sizes) <= 1


def test_no_consumer_owns_nothing_and_nobody_owns_anything() -> None:
    assert assign([], 64) == {}
    assert owned_by([], BROKERS[0], 64) == frozenset()


def test_every_broker_computes_the_same_from_the_same_membership() -> None:
    given = members(5)
    shuffled = random.Random(7).sample(given, len(given))
    assert assign(given, 64) == assign(shuffled, 64)
    # Each broker's union is its consumers' shares; together they cover the topic once.
    unions = [owned_by(given, b, 64) for b in BROKERS]
    assert sorted(itertools.chain.from_iterable(unions)) == list(range(64))


def test_sorted_by_broker_then_consumer_in_contiguous_ranges() -> None:
    shares = assign([("b2", "a"), ("b1", "z"), ("b1", "a")], 6)
    assert shares == {("b1", "a"): range(0, 2), ("b1", "z"): range(2, 4), ("b2", "a"): range(4, 6)}


def test_stable_under_changes_elsewhere() -> None:
    """A topic's shares depend only on its own consumers: brokers without consumers
    of it, and consumers of other topics, coming and going move none of its buckets."""
    view = Membership()
    for b in BROKERS[:2]:
        view.put_broker(BrokerInfo(b, b, 0, 0))
    view.put_consumer("jobs", BROKERS[0], "c0", 10)
    view.put_consumer("jobs", BROKERS[1], "c1", 11)
    before = {b: view.owned("jobs", b, 64) for b in BROKERS}

    view.put_broker(BrokerInfo(BROKERS[2], BROKERS[2], 0, 0))  # a broker joins
    view.put_consumer("other", BROKERS[2], "x", 12)  # another topic's consumer
    view.put_consumer("other", BROKERS[0], "y", 13)
    view.remove_consumer("other", BROKERS[0], "y")
    view.put_broker(BrokerInfo(BROKERS[0], BROKERS[0], 0, 999))  # a heartbeat

    assert {b: view.owned("jobs", b, 64) for b in BROKERS} == before


def test_a_consumer_leaving_hands_its_share_to_the_rest() -> None:
    view = Membership()
    for b in BROKERS:
        view.put_broker(BrokerInfo(b, b, 0, 0))
    for i, b in enumerate(BROKERS):
        view.put_consumer("jobs", b, f"c{i}", i + 1)
    view.remove_consumer("jobs", BROKERS[2], "c2")
    assert view.owned("jobs", BROKERS[2], 64) == frozenset()
    assert view.owned("jobs", BROKERS[0], 64) | view.owned("jobs", BROKERS[1], 64) == set(range(64))


def test_a_dead_brokers_consumers_stop_counting_with_its_broker_key() -> None:
    view = Membership()
    for b in BROKERS[:2]:
        view.put_broker(BrokerInfo(b, b, 0, 0))
    view.put_consumer("jobs", BROKERS[0], "c0", 1)
    view.put_consumer("jobs", BROKERS[1], "c1", 2)
    view.remove_broker(BROKERS[1])  # its lease expired; consumer keys go in the same revision
    assert view.members("jobs") == [(BROKERS[0], "c0")]
    assert view.owned("jobs", BROKERS[0], 8) == frozenset(range(8))


def test_a_reconnected_consumer_counts_once_at_its_newest_broker() -> None:
    """A consumer that failed over is registered under two brokers until the old
    lease expires; the newest registration wins, so its share moves with it at once."""
    view = Membership()
    for b in BROKERS:
        view.put_broker(BrokerInfo(b, b, 0, 0))
    view.put_consumer("jobs", BROKERS[2], "c2", 5)
    view.put_consumer("jobs", BROKERS[0], "c0", 6)
    view.put_consumer("jobs", BROKERS[0], "c2", 9)  # c2 reconnected to broker 0
    assert view.members("jobs") == [(BROKERS[0], "c0"), (BROKERS[0], "c2")]
    assert view.owned("jobs", BROKERS[0], 16) == frozenset(range(16))
    assert view.owned("jobs", BROKERS[2], 16) == frozenset()


def test_ranges_for_display() -> None:
    assert as_ranges([7, 0, 1, 2, 5, 8]) == [(0, 2), (5, 5), (7, 8)]
    assert as_ranges([]) == []
