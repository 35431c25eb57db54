"""Counting each key's held messages: up with leases, down with settles,
hand-backs and lease expiry."""

from __future__ import annotations

from dejaq.broker.dispatch.key_held import KeyHeld


def test_leases_count_per_key_and_unkeyed_messages_do_not() -> None:
    held = KeyHeld()
    held.leased([("m1", "a"), ("m2", "a"), ("m3", "b"), ("m4", "")], until=100)
    assert (held.held("a"), held.held("b"), held.held("")) == (2, 1, 0)
    assert len(held) == 3


def test_a_release_counts_down_once_and_unknown_ids_change_nothing() -> None:
    held = KeyHeld()
    held.leased([("m1", "a"), ("m2", "a")], until=100)
    held.released(["m1", "m1", "nope"])
    assert held.held("a") == 1
    held.released(["m2"])
    assert held.held("a") == 0
    assert list(held.keys()) == []


def test_leases_that_run_out_no_longer_count() -> None:
    held = KeyHeld()
    held.leased([("m1", "a")], until=100)
    held.leased([("m2", "a")], until=200)
    held.expire(99)
    assert held.held("a") == 2
    held.expire(100)
    assert held.held("a") == 1
    held.expire(200)
    assert held.held("a") == 0


def test_an_extended_lease_counts_until_its_new_end() -> None:
    held = KeyHeld()
    held.leased([("m1", "a")], until=100)
    held.extended(["m1"], until=300)
    held.expire(150)
    assert held.held("a") == 1
    held.expire(300)
    assert held.held("a") == 0


def test_a_message_leased_again_counts_once() -> None:
    # Given a lease that ran out here unseen, and the message leased here again
    held = KeyHeld()
    held.leased([("m1", "a")], until=100)
    held.leased([("m1", "a")], until=500)
    # Then it counts once, until its new lease ends (the old end is stale)
    assert held.held("a") == 1
    held.expire(100)
    assert held.held("a") == 1
    held.expire(500)
    assert held.held("a") == 0
