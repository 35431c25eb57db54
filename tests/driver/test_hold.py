"""The driver's hold: deliveries sent ahead are released when the broker's clock
(known only from the frames' ``sent_at``) reaches their timestamp, never sooner
by this process's monotonic clock, in due order."""

from __future__ import annotations

import asyncio
import time
from typing import Any, cast

import pytest

from dejaq.driver.delivery import Delivery
from dejaq.driver.hold import Hold

pytestmark = pytest.mark.timeout(10)
BROKER_NOW = 1_800_000_000_000  # the broker's clock, unrelated to ours


def deliveries(*timestamps: int) -> list[Delivery]:
    return [Delivery(f"m{t}", t, b"", 1, 1, 0, 0, cast(Any, None), 1000) for t in timestamps]


class Released:
    """What the hold released, with our monotonic ms at release."""

    def __init__(self) -> None:
        self.at: dict[str, float] = {}
        self.order: list[str] = []
        self.event = asyncio.Event()

    def __call__(self, ds: list[Delivery]) -> None:
        now = asyncio.get_running_loop().time() * 1000
        for d in ds:
            self.at[d.id] = now
            self.order.append(d.id)
        self.event.set()

    async def count(self, n: int) -> None:
        while len(self.order) < n:
            self.event.clear()
            await asyncio.wait_for(self.event.wait(), 5)


async def test_due_deliveries_go_at_once_the_others_when_the_broker_clock_reaches_them() -> None:
    released = Released()
    hold = Hold(released)
    added = asyncio.get_running_loop().time() * 1000
    # A frame made at BROKER_NOW: one already due, two due 30 and 60 ms later
    hold.add(
        deliveries(BROKER_NOW - 1, BROKER_NOW + 30, BROKER_NOW + 60),
        [BROKER_NOW - 1, BROKER_NOW + 30, BROKER_NOW + 60],
        BROKER_NOW,
    )
    assert released.order == [f"m{BROKER_NOW - 1}"]
    assert len(hold) == 2
    await released.count(3)
    # Never sooner than the broker's clock allows: the frame was made no later
    # than we read it, so its messages are due no sooner than their distance
    # from sent_at after we read it.
    assert released.at[f"m{BROKER_NOW + 30}"] - added >= 30
    assert released.at[f"m{BROKER_NOW + 60}"] - added >= 60
    assert len(hold) == 0


async def test_a_frame_out_of_order_is_released_in_due_order() -> None:
    released = Released()
    hold = Hold(released)
    stamps = [BROKER_NOW + 20, BROKER_NOW + 5, BROKER_NOW + 12]
    hold.add(deliveries(*stamps), stamps, BROKER_NOW)
    await released.count(3)
    assert released.order == [f"m{t}" for t in sorted(stamps)]


async def test_frames_from_a_later_broker_clock_release_by_the_best_bound() -> None:
    # Two frames: the second made 10 ms (broker clock) after the first but read
    # at once: the broker's clock is at least 10 ms further than the first said,
    # and the first frame's messages may go sooner too, never before that bound.
    released = Released()
    hold = Hold(released)
    added = asyncio.get_running_loop().time() * 1000
    hold.add(deliveries(BROKER_NOW + 40), [BROKER_NOW + 40], BROKER_NOW)
    hold.add(deliveries(BROKER_NOW + 41), [BROKER_NOW + 41], BROKER_NOW + 10)
    await released.count(2)
    first = released.at[f"m{BROKER_NOW + 40}"] - added
    assert 30 - 1 <= first < 40  # by the second frame's bound (less our own few µs)


async def test_clear_hands_back_what_is_held_and_releases_nothing_more() -> None:
    released = Released()
    hold = Hold(released)
    hold.add(
        deliveries(BROKER_NOW + 20, BROKER_NOW + 30), [BROKER_NOW + 20, BROKER_NOW + 30], BROKER_NOW
    )
    assert hold.last_release_s() > 0.02
    left = hold.clear()
    assert [d.id for d in left] == [f"m{BROKER_NOW + 20}", f"m{BROKER_NOW + 30}"]
    await asyncio.sleep(0.05)
    assert released.order == []
    assert hold.last_release_s() == 0


async def test_a_frame_read_before_a_late_timer_does_not_overtake_what_is_held() -> None:
    # A frame holds a message due 5 ms after it was made; the loop is then busy
    # for 30 ms, so the timer that would release it has not run when the next
    # frame is read: that frame's due message is later, and must come after.
    released = Released()
    hold = Hold(released)
    hold.add(deliveries(BROKER_NOW + 5), [BROKER_NOW + 5], BROKER_NOW)
    assert hold.holding
    time.sleep(0.03)  # noqa: ASYNC251 (the point: a busy loop, no timer runs)
    hold.add(deliveries(BROKER_NOW + 20), [BROKER_NOW + 20], BROKER_NOW + 30)
    assert released.order == [f"m{BROKER_NOW + 5}", f"m{BROKER_NOW + 20}"]
    assert not hold.holding


async def test_a_busy_loop_takes_what_came_due_without_waiting_for_the_timer() -> None:
    # Given a frame holding a message due 5 ms after it was made and one due 60 ms after
    released = Released()
    hold = Hold(released)
    hold.add(
        deliveries(BROKER_NOW + 5, BROKER_NOW + 60), [BROKER_NOW + 5, BROKER_NOW + 60], BROKER_NOW
    )
    # when asked before either is due, then nothing goes
    assert not hold.release_due()
    assert released.order == []
    # when the loop is then busy for 30 ms, so the timer has not run, and asked again
    time.sleep(0.03)  # noqa: ASYNC251 (the point: a busy loop, no timer runs)
    # then the one due goes at once, the other stays held
    assert hold.release_due()
    assert released.order == [f"m{BROKER_NOW + 5}"]
    assert len(hold) == 1
    await released.count(2)
    assert released.order == [f"m{BROKER_NOW + 5}", f"m{BROKER_NOW + 60}"]


class CoarseLoop(asyncio.SelectorEventLoop):
    """A loop whose clock moves a whole ms at a time and whose timers are set a
    whole number of ms from it, rounded (as uvloop's are): a timer may run before
    its time by that clock. Counts the timers set."""

    def __init__(self) -> None:
        super().__init__()
        self.timers = 0

    def time(self) -> float:
        return float(int(time.monotonic() * 1000)) / 1000

    def call_at(self, when: float, callback: Any, *args: Any, context: Any = None) -> Any:
        self.timers += 1
        now = self.time()
        when = now + round((when - now) * 1000) / 1000
        return super().call_at(when, callback, *args, context=context)


def test_a_loop_whose_timers_run_early_wakes_the_hold_a_few_times_not_in_a_spin() -> None:
    # given a loop with a whole-ms clock whose timers may run before their time
    loop = CoarseLoop()
    due = [BROKER_NOW + 3 * n for n in range(1, 9)]

    async def hold_them() -> tuple[float, dict[str, float]]:
        released = Released()
        hold = Hold(released)
        start = loop.time() * 1000
        # messages due 4 to 25 ms after a frame made now: with the hold's margin
        # each one's release falls inside a ms
        for t in due:
            hold.add(deliveries(t), [t], BROKER_NOW - 1)
        await released.count(len(due))
        return start, released.at

    try:
        # when the hold releases them
        start, at = loop.run_until_complete(hold_them())
    finally:
        loop.close()
    # then none early, and the hold's timer was set a few times each, not once a turn
    assert all(at[f"m{t}"] - start >= t - BROKER_NOW + 1 for t in due)
    assert loop.timers <= 3 * len(due), loop.timers
