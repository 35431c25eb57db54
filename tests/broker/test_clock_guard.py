"""The skew guard judges this broker's clock against the cluster's median, and
a step of its own wall clock at the clock's next reading."""

from __future__ import annotations

from dejaq.broker.clock.guard import ClockGuard
from dejaq.broker.clock.guarded import GuardedClock
from dejaq.broker.cluster.skew import SkewTracker
from dejaq.broker.coordination import BrokerView, ClusterView

from .inprocess import HostClocks

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


def test_a_first_judgement_that_stops_the_broker_is_told_and_counts_as_stopped() -> None:
    # Given a broker that just joined: paused while it waits for the others' clocks
    guard = ClockGuard(BOUND)
    told: list[bool] = []
    guard.on_change = told.append
    assert guard.paused and not guard.stopped
    # When its first judgement finds it 500 ms ahead
    guard.update(view(-500, -500))
    # Then it is stopped, and the broker hears of it (it moves its consumers away)
    assert guard.stopped
    assert told == [True]


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


def measured(clocks: HostClocks, peer_skew_ms: int = 0) -> tuple[ClockGuard, SkewTracker]:
    """A guard that has heard a peer ``peer_skew_ms`` from this host ten times
    (a heartbeat a second) and judged this broker's clock by it."""
    tracker = SkewTracker(warn_ms=50, clocks=clocks)
    guard = ClockGuard(BOUND, clocks=clocks)
    for _ in range(10):
        clocks.advance(1_000)
        tracker.observe("b0", clocks.wall_ms + peer_skew_ms, clocks.wall_ms)
    guard.update(view(tracker.skew_ms("b0")))
    return guard, tracker


def test_a_step_ahead_stops_the_broker_at_its_clocks_next_reading() -> None:
    # Given a broker whose clock agrees with its peer's, dispatching
    clocks = HostClocks()
    guard, tracker = measured(clocks)
    clock = GuardedClock(guard, clocks)
    assert not guard.paused
    before = clock.now_ms()
    # When its wall clock steps 400 ms ahead, its monotonic clock running on
    clocks.advance(5)
    clocks.step(400)
    # Then its next reading stops dispatch, and keeps to the time as measured
    assert clock.now_ms() == before + 5
    assert guard.paused and guard.deviation_ms == 400
    # and the guard's next judgement, with no new heartbeat (etcd down), agrees
    assert tracker.skew_ms("b0") == -400
    guard.update(view(tracker.skew_ms("b0")))
    assert guard.paused and guard.deviation_ms == 400
    clocks.advance(5)
    assert clock.now_ms() == before + 10
    # When its clock is stepped back
    clocks.step(-400)
    guard.update(view(tracker.skew_ms("b0")))
    # Then it dispatches again, on its wall clock
    assert not guard.paused and guard.deviation_ms == 0
    assert clock.now_ms() == clocks.wall_ms


def test_a_step_within_the_bound_is_followed() -> None:
    # Given a broker 20 ms ahead of its peer
    clocks = HostClocks()
    guard, _ = measured(clocks, peer_skew_ms=-20)
    clock = GuardedClock(guard, clocks)
    assert not guard.paused and guard.deviation_ms == 20
    # When its wall clock steps 50 ms further ahead
    clocks.step(50)
    # Then the clock follows it and the guard counts it: 70 ms is within the bound
    assert clock.now_ms() == clocks.wall_ms
    assert not guard.paused and guard.deviation_ms == 70
    # and a step as far again takes it past the bound
    clocks.step(50)
    clock.now_ms()
    assert guard.paused and guard.deviation_ms == 120


def test_a_step_back_stops_the_broker_too() -> None:
    clocks = HostClocks()
    guard, _ = measured(clocks)
    clock = GuardedClock(guard, clocks)
    before = clock.now_ms()
    clocks.step(-300)
    assert clock.now_ms() == before
    assert guard.paused and guard.deviation_ms == -300


def test_before_its_first_judgement_a_step_is_not_followed() -> None:
    # Given a broker that has not heard its peers yet (it is not dispatching)
    clocks = HostClocks()
    guard = ClockGuard(BOUND, clocks=clocks)
    clock = GuardedClock(guard, clocks)
    before = clock.now_ms()
    # When its wall clock steps, then the clock keeps to the monotonic one
    clocks.step(400)
    assert clock.now_ms() == before
    assert guard.paused
