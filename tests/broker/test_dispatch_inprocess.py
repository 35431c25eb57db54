"""The dispatcher, produce, consume and control in-process, on a manual clock."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.clock.guard import ClockGuard
from dejaq.broker.context import BrokerContext
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins.base import LeaseRequest, Leases

from .inprocess import LoopTurns, ManualClock, Session, produce_at, running_broker, settle_down

pytestmark = pytest.mark.timeout(30)
T = "jobs"


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    async with running_broker(clock) as broker:
        settings = settings_to_pb(TopicSettings(buckets=8, lease_ms=1_000))
        await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
        yield broker


async def test_nothing_is_delivered_before_its_millisecond(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer, and messages due 5 and 10 ms from now
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    now = clock.now
    first, second = await produce_at(broker, T, [now + 5, now + 10])
    await settle_down()
    # Then nothing arrives while the clock stands 1 ms before the first
    clock.advance(4)
    await settle_down()
    assert session.ids == []
    # When the clock reaches it, exactly the first arrives
    clock.advance(1)
    await settle_down()
    assert session.ids == [first]
    clock.advance(4)
    await settle_down()
    assert session.ids == [first]
    clock.advance(1)
    await settle_down()
    assert session.ids == [first, second]
    await session.close()


async def test_a_produce_that_lands_earlier_wakes_the_sleeping_dispatcher(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a dispatcher asleep until a message due in an hour
    session = Session(broker, T, "c1", credits=10)
    now = clock.now
    await produce_at(broker, T, [now + 3_600_000])
    await settle_down()
    # When a message due now is produced (the hint), without the clock moving
    (due_now,) = await produce_at(broker, T, [now])
    await settle_down()
    # Then it is delivered at once
    assert session.ids == [due_now]
    await session.close()


async def test_a_consumer_gets_no_more_than_its_credit_until_it_acks(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given 10 due messages and a consumer with 3 credits
    await produce_at(broker, T, [clock.now] * 10)
    session = Session(broker, T, "c1", credits=3)
    await settle_down()
    assert len(session.deliveries) == 3
    # When it acks them and returns 3 credits on the same frame
    session.ack(session.deliveries, credits=3)
    await settle_down()
    # Then 3 more arrive, and the acked ones are gone from storage
    assert len(session.deliveries) == 6
    assert (await broker.storage.counts(T, clock.now)).leased == 3
    assert session.settled[-1].rejections == []
    await session.close()


async def test_consumers_with_credit_are_served_round_robin(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given two consumers with one credit each
    a = Session(broker, T, "a", credits=1)
    b = Session(broker, T, "b", credits=1)
    await settle_down()
    # When two messages fall due
    await produce_at(broker, T, [clock.now + 1, clock.now + 1])
    clock.advance(1)
    await settle_down()
    # Then each consumer got one, none twice
    assert (len(a.deliveries), len(b.deliveries)) == (1, 1)
    assert set(a.ids).isdisjoint(b.ids)
    await a.close()
    await b.close()


async def test_a_stale_ack_is_refused_in_the_settle_result(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a delivery whose lease ran out (1 s past the look-ahead) and came again
    (mid,) = await produce_at(broker, T, [clock.now])
    session = Session(broker, T, "c1", credits=5)
    await settle_down()
    clock.advance(broker.config.lookahead_ms + 1_000)
    await settle_down()
    first, second = session.deliveries
    assert (first.id, second.id) == (mid, mid)
    # When both handles are acked in one frame
    session.ack([first, second])
    await settle_down()
    # Then the stale one is refused (ABORTED), the current one applied
    (result,) = session.settled
    assert [(r.index, r.code) for r in result.rejections] == [(0, 10)]
    assert (await broker.storage.counts(T, clock.now)).leased == 0
    await session.close()


async def test_deleting_the_topic_ends_its_consumers(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a connected consumer
    session = Session(broker, T, "c1", credits=5)
    await settle_down()
    # When its topic is deleted under the dispatcher
    await control.delete_topic(broker, pb.DeleteTopicRequest(name=T))
    await settle_down()
    # Then its stream ends with NOT_FOUND's error
    assert session.error is not None and "deleted" in str(session.error)
    assert T not in broker.dispatchers


async def test_what_fell_due_while_the_clock_guard_held_dispatch_goes_out_when_it_lets_go(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a broker whose clock guard holds dispatch back (as one that has just
    # joined a cluster, until it has heard the others' clocks), and a consumer
    broker.guard = ClockGuard(bound_ms=100)
    assert broker.guard.paused
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    # When messages due now are stored meanwhile (their hints find no bucket served)
    now = clock.now
    due = await produce_at(broker, T, [now, now, now])
    await settle_down()
    assert session.ids == []
    # and the guard lets it go, the clock standing still
    assert broker.guard.update(broker.coordinator.view())
    broker.clock_guard_changed(broker.guard.paused)
    await settle_down()
    # Then they go out at once: no re-scan (an hour away here) was needed
    assert sorted(session.ids) == sorted(due)
    await session.close()


async def test_a_pass_lets_the_loop_run_between_its_consumers_leases(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given three consumers with credit, a task counting the loop's turns, and
    # storage noting the turn of each lease call (a memory lease never pauses)
    sessions = [Session(broker, T, f"c{i}", credits=5) for i in range(3)]
    await settle_down()
    at: list[int] = []
    turns = LoopTurns()
    lease = broker.storage.lease

    async def watched(request: LeaseRequest) -> Leases:
        at.append(turns.now)
        return await lease(request)

    broker.storage.lease = watched  # type: ignore[method-assign]
    async with turns:
        # When more falls due than all of them may take
        await produce_at(broker, T, [clock.now + 1] * 30)
        clock.advance(1)
        await settle_down()
    # Then each took its credit, each lease call in a turn of its own
    assert [len(s.deliveries) for s in sessions] == [5, 5, 5]
    assert len(at) >= 3
    assert all(later > earlier for earlier, later in itertools.pairwise(at))
    for s in sessions:
        await s.close()


async def test_a_dispatcher_stops_even_when_storage_swallows_the_cancel(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a storage call that swallows a cancel (as a client library may)
    lease = broker.storage.lease
    entered = asyncio.Event()

    async def swallowing(request: LeaseRequest) -> Leases:
        entered.set()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(30)
        return await lease(request)

    broker.storage.lease = swallowing  # type: ignore[method-assign]
    session = Session(broker, T, "c1", credits=5)
    await settle_down()
    await produce_at(broker, T, [clock.now])
    await asyncio.wait_for(entered.wait(), 5)
    # When its dispatcher is stopped mid-call, then it ends all the same
    for d in list(broker.dispatchers):
        await asyncio.wait_for(broker.drop_dispatcher(d, RuntimeError("over")), 5)
    assert not broker.dispatchers
    await session.close()
