"""The skew guard judges this broker's clock against the cluster's median."""

from __future__ import annotations

from dejaq.broker.clock.guard import ClockGuard
from dejaq.broker.coordination import BrokerView, ClusterView

BOUND = 100


def view(*skews: int | None) -> ClusterView:
    """This broker ("me") and others whose clocks are ``skews`` ms from ours."""
    others = [BrokerView(f"b{i}", f"b{i}", 0, s) for i, s in enumerate(skews)]
    return ClusterView("etcd", "c", "me", True, [BrokerView("me", "me", 0, 0), *others])


def test_a_broker_alone_dispatches() -> None:
    guard = ClockGuard(BOUND)
    assert guard.update(view()) is True
    assert not guard.paused and guard.deviation_ms == 0


def test_a_broker_waits_until_it_has_heard_every_clock() -> None:
    guard = ClockGuard(BOUND)
    assert guard.update(view(3, None)) is False
    assert guard.paused
    assert guard.update(view(3, -2)) is True
    assert not guard.paused


def test_the_broker_ahead_of_the_other_two_stops_and_they_go_on() -> None:
    ahead, on_time = ClockGuard(BOUND), ClockGuard(BOUND)
    ahead.update(view(-500, -498))
    on_time.update(view(2, 500))
    assert ahead.paused and ahead.deviation_ms == 498
    assert not on_time.paused


def test_a_broker_behind_stops_too() -> None:
    behind = ClockGuard(BOUND)
    behind.update(view(503, 500))
    assert behind.paused and behind.deviation_ms == -500


def test_of_two_brokers_apart_the_one_ahead_stops() -> None:
    ahead, behind = ClockGuard(BOUND), ClockGuard(BOUND)
    ahead.update(view(-500))
    behind.update(view(500))
    assert ahead.paused
    assert not behind.paused


def test_a_broker_back_within_the_bound_resumes() -> None:
    guard = ClockGuard(BOUND)
    guard.update(view(-500, -500))
    assert guard.paused
    assert guard.update(view(-50, -60)) is True
    assert not guard.paused
    assert guard.update(view(-40, -60)) is False  # no change, nothing to tell


def test_without_news_a_broker_judges_by_the_clocks_it_heard_after_a_grace() -> None:
    guard = ClockGuard(BOUND, grace_s=0)
    assert guard.update(view(None, 4)) is True
    assert not guard.paused
