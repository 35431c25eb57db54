"""The storage checks a joining broker makes against the live brokers' heartbeats."""

from __future__ import annotations

import pytest

from dejaq.broker.cluster.storage_claim import (
    StorageMismatch,
    check_after_joining,
    check_before_joining,
)

A, B, ME = "10.0.0.1:7700", "10.0.0.2:7700", "10.0.0.3:7700"


def test_joining_brokers_on_the_cluster_store_pass() -> None:
    live = [(A, "s1", 10), (B, "s1", 11)]
    check_before_joining(live, ME, "s1", "c")
    check_after_joining([*live, (ME, "s1", 12)], ME, "s1", "c")


def test_a_broker_on_another_store_is_refused_before_writing() -> None:
    with pytest.raises(StorageMismatch, match=r"cluster 'c' runs on another storage"):
        check_before_joining([(A, "s1", 10)], ME, "s2", "c")


def test_a_first_broker_and_brokers_of_unknown_store_pass() -> None:
    check_before_joining([], ME, "s2", "c")
    check_before_joining([(A, "", 10)], ME, "s2", "c")  # an older broker says nothing
    check_after_joining([(A, "", 10), (ME, "s2", 11)], ME, "s2", "c")


def test_of_two_joining_at_once_on_different_stores_the_later_goes() -> None:
    # Both passed the check before writing; now both see each other
    live = [(A, "s1", 10), (ME, "s2", 11)]
    with pytest.raises(StorageMismatch):
        check_after_joining(live, ME, "s2", "c")
    check_after_joining(live, A, "s1", "c")  # the earlier stays
