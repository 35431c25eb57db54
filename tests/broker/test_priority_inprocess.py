"""Priority topics in-process, on a manual clock: the most urgent available
message first, FIFO within a priority; not-before times, nacks with a delay,
lease expiry and moves bring messages back at their priority; users never see
a rank; bad input is refused and changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.produce import produce
from dejaq.broker.context import BrokerContext
from dejaq.broker.observability.gauges import refresh
from dejaq.core import priority
from dejaq.core.errors import InvalidArgument, NotFound, WrongKind
from dejaq.core.model import KIND_PRIORITY, InsertStatus, TopicSettings
from dejaq.core.wire.batches import decode_results, encode_messages
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins.base import LeaseRequest

from .inprocess import ManualClock, Session, produce_at, running_broker, settle_down

pytestmark = pytest.mark.timeout(30)
T = "jobs"
LEASE = 1_000


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    # The broker's look-ahead is on (20 ms): a priority topic must not use it.
    async with running_broker(clock, lookahead_ms=20) as broker:
        settings = TopicSettings(buckets=8, lease_ms=LEASE, kind=KIND_PRIORITY, priorities=10)
        await control.create_topic(
            broker, pb.CreateTopicRequest(name=T, settings=settings_to_pb(settings))
        )
        yield broker


async def send(
    broker: BrokerContext,
    ids: Sequence[str],
    priorities: Sequence[int],
    at: Sequence[int] | None = None,
    topic: str = T,
) -> pb.ProduceResponse:
    """Produce one frame; ``at`` are the not-before times (default: 0, now)."""
    stamps = list(at) if at is not None else [0] * len(ids)
    batch = encode_messages(stamps, [i.encode() for i in ids], list(ids), priorities=priorities)
    return await produce(broker, pb.ProduceRequest(topic=topic, batch=batch))


def nack(session: Session, ids: Sequence[str], versions: Sequence[int], delay: int) -> None:
    settle = pb.Settle(kind=pb.Settle.NACK, ids=ids, versions=versions, ms=delay, credits=1)
    session.send(pb.ConsumeRequest(settle=settle))


async def test_a_backlog_goes_out_most_urgent_first_fifo_within_a_priority(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a backlog of mixed priorities, made available one ms apart
    produced = [("a5", 5), ("b0", 0), ("c3", 3), ("d0", 0), ("e5", 5), ("f3", 3), ("g9", 9)]
    for mid, p in produced:
        await send(broker, [mid], [p])
        clock.advance(1)
    # When a consumer comes
    session = Session(broker, T, "c1", credits=100)
    await settle_down()
    # Then it gets them by priority, and by arrival within one
    assert session.ids == ["b0", "d0", "c3", "f3", "a5", "e5", "g9"]
    assert [d.priority for d in session.deliveries] == [0, 0, 3, 3, 5, 5, 9]
    # And each shows when it became available, never a rank
    start = clock.now - len(produced)
    shown = {d.id: d.timestamp for d in session.deliveries}
    assert shown == {mid: start + n for n, (mid, _) in enumerate(produced)}
    await session.close()


async def test_an_idle_consumer_gets_a_message_at_once_without_look_ahead(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given an idle consumer
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    # When a message is produced, the clock standing still
    await send(broker, ["now"], [7])
    await settle_down()
    # Then it is delivered at once, with its priority and the time it came
    (d,) = session.deliveries
    assert (d.id, d.priority, d.timestamp) == ("now", 7, clock.now)
    # And its wait is measured as such, never as lateness (early or late)
    assert broker.metrics.priority_wait._series[T].counts.sum() == 1
    assert T not in broker.metrics.lateness._series or not any(
        broker.metrics.lateness._series[T].counts
    )
    await session.close()


async def test_a_not_before_time_holds_a_message_back_until_then(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given an urgent message not before 50 ms from now and a lax one available now
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    await send(broker, ["later", "lax"], [0, 9], [clock.now + 50, 0])
    await settle_down()
    # Then only the lax one comes at first; the urgent one not a ms early
    assert session.ids == ["lax"]
    clock.advance(49)
    await settle_down()
    assert session.ids == ["lax"]
    clock.advance(1)
    await settle_down()
    assert session.ids == ["lax", "later"]
    assert session.deliveries[1].timestamp == clock.now
    await session.close()


async def test_a_nack_with_a_delay_comes_back_at_its_priority(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer taking one at a time, holding an urgent message
    session = Session(broker, T, "c1", credits=1)
    await settle_down()
    await send(broker, ["urgent"], [1])
    await settle_down()
    (held,) = session.deliveries
    # When it nacks it with a 100 ms delay while a lax message waits
    await send(broker, ["lax-1", "lax-2"], [8, 8])
    nack(session, ["urgent"], [held.version], 100)
    await settle_down()
    # Then the lax one goes meanwhile (its credit came back with the nack)
    assert session.ids == ["urgent", "lax-1"]
    # And once the delay is over, the urgent one comes before the other lax one
    clock.advance(100)
    session.ack(session.deliveries[-1:], credits=1)
    await settle_down()
    assert session.ids == ["urgent", "lax-1", "urgent"]
    again = session.deliveries[-1]
    assert (again.priority, again.deliveries, again.timestamp) == (1, 2, clock.now)
    await session.close()


async def test_an_expired_lease_redelivers_at_its_priority(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer that took a message and went silent
    first = Session(broker, T, "c1", credits=1)
    await settle_down()
    await send(broker, ["job"], [4])
    await settle_down()
    assert first.ids == ["job"]
    await first.vanish()
    # When another consumer waits and the lease runs out
    second = Session(broker, T, "c2", credits=10)
    await settle_down()
    assert second.ids == []
    clock.advance(LEASE)
    await settle_down()
    # Then the message is delivered again, at its priority
    (d,) = second.deliveries
    assert (d.id, d.priority, d.deliveries) == ("job", 4, 2)
    assert d.timestamp == clock.now
    await second.close()


async def test_a_move_changes_the_priority(broker: BrokerContext, clock: ManualClock) -> None:
    # Given two waiting messages, the lax one first
    await send(broker, ["lax", "mid"], [9, 5])
    clock.advance(1)
    lax = await broker.storage.get(T, "lax")
    # When the lax one is moved to priority 0
    result = await control.move(
        broker, pb.MoveRequest(topic=T, id="lax", version=lax.version, priority=0)
    )
    assert result.timestamp_ms == clock.now
    # Then get shows it at priority 0, available since the move
    shown = await control.get_message(broker, pb.GetMessageRequest(topic=T, id="lax"))
    assert (shown.priority, shown.timestamp_ms, shown.state) == (0, clock.now, "due")
    # And a consumer gets it first
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    assert session.ids == ["lax", "mid"]
    await session.close()


async def test_a_move_without_a_priority_keeps_it_and_sets_the_not_before(
    broker: BrokerContext, clock: ManualClock
) -> None:
    await send(broker, ["a", "b"], [3, 6])
    a = await broker.storage.get(T, "a")
    # When "a" is moved 30 ms ahead, keeping its priority
    moved = await control.move(
        broker, pb.MoveRequest(topic=T, id="a", version=a.version, timestamp_ms=clock.now + 30)
    )
    assert moved.timestamp_ms == clock.now + 30
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    assert session.ids == ["b"]
    clock.advance(30)
    await settle_down()
    assert session.ids == ["b", "a"]
    assert session.deliveries[1].priority == 3
    await session.close()


async def test_get_describe_and_cancel_never_show_a_rank(
    broker: BrokerContext, clock: ManualClock
) -> None:
    await send(broker, ["x"], [2])
    start = clock.now
    clock.advance(5)
    shown = await control.get_message(broker, pb.GetMessageRequest(topic=T, id="x"))
    assert (shown.timestamp_ms, shown.priority) == (start, 2)
    described = await control.describe_topic(broker, pb.DescribeTopicRequest(name=T))
    assert described.next_due_ms == clock.now
    assert described.topic.settings.kind == KIND_PRIORITY
    assert described.topic.settings.priorities == 10
    cancelled = await control.cancel(
        broker, pb.CancelRequest(topic=T, id="x", version=shown.version)
    )
    assert cancelled.timestamp_ms == start


async def test_a_priority_out_of_range_is_rejected_and_nothing_stored(
    broker: BrokerContext,
) -> None:
    # When a frame carries a valid message and one of priority 10 (of 0..9)
    response = await send(broker, ["ok", "bad"], [9, 10])
    # Then the bad one is rejected with a reason, the other stored
    status, _ = decode_results(response.results)
    assert status == [InsertStatus.ACCEPTED, InsertStatus.REJECTED]
    (rejection,) = response.rejections
    assert rejection.index == 1 and "out of range" in rejection.reason
    assert rejection.code == 3  # INVALID_ARGUMENT
    with pytest.raises(NotFound):
        await broker.storage.get(T, "bad")
    assert (await broker.storage.get(T, "ok")).priority == 9


async def test_a_timeline_refuses_a_priority_and_behaves_as_before(
    broker: BrokerContext, clock: ManualClock
) -> None:
    await control.create_topic(broker, pb.CreateTopicRequest(name="plain"))
    response = await send(broker, ["p"], [1], [clock.now], topic="plain")
    (rejection,) = response.rejections
    assert "timeline" in rejection.reason
    with pytest.raises(NotFound):
        await broker.storage.get("plain", "p")
    # Priority 0 (the default) is accepted; the message is due at its time
    (mid,) = await produce_at(broker, "plain", [clock.now + 5])
    assert (await broker.storage.get("plain", mid)).timestamp == clock.now + 5
    with pytest.raises(InvalidArgument):
        await control.move(
            broker,
            pb.MoveRequest(topic="plain", id=mid, version=1, timestamp_ms=clock.now, priority=2),
        )
    assert (await broker.storage.get("plain", mid)).timestamp == clock.now + 5


async def test_a_move_to_a_priority_out_of_range_changes_nothing(
    broker: BrokerContext,
) -> None:
    await send(broker, ["m"], [4])
    before = await broker.storage.get(T, "m")
    with pytest.raises(InvalidArgument, match="out of range"):
        await control.move(
            broker, pb.MoveRequest(topic=T, id="m", version=before.version, priority=10)
        )
    assert await broker.storage.get(T, "m") == before


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (pb.TopicSettings(kind="fifo"), "timeline, priority"),
        (pb.TopicSettings(kind="priority", priorities=1001), "between 1 and 1000"),
        (
            pb.TopicSettings(kind="priority", aging_ms=priority.NO_AGING_STEP + 1),
            "aging must be",
        ),
        (pb.TopicSettings(priorities=5), "priority topics"),
        (pb.TopicSettings(kind="timeline", aging_ms=10), "priority topics"),
    ],
)
async def test_bad_topic_settings_are_refused_and_create_nothing(
    broker: BrokerContext, settings: pb.TopicSettings, words: str
) -> None:
    with pytest.raises(InvalidArgument, match=words):
        await control.create_topic(broker, pb.CreateTopicRequest(name="bad", settings=settings))
    with pytest.raises(NotFound):
        await broker.storage.get_topic("bad")


async def test_zero_priorities_mean_the_default_and_no_aging_is_allowed(
    broker: BrokerContext,
) -> None:
    created = await control.create_topic(
        broker,
        pb.CreateTopicRequest(name="dflt", settings=pb.TopicSettings(kind="priority")),
    )
    assert (created.settings.priorities, created.settings.aging_ms) == (
        priority.DEFAULT_PRIORITIES,
        0,
    )


@pytest.mark.parametrize(
    "change",
    [
        pb.UpdateTopicRequest(name=T, kind="timeline"),
        pb.UpdateTopicRequest(name=T, priorities=20, max_rate=5.0),
        pb.UpdateTopicRequest(name=T, aging_ms=1000),
    ],
)
async def test_kind_priorities_and_aging_cannot_change(
    broker: BrokerContext, change: pb.UpdateTopicRequest
) -> None:
    before = await broker.storage.get_topic(T)
    with pytest.raises(WrongKind, match="fixed when it is created"):
        await control.update_topic(broker, change)
    assert await broker.storage.get_topic(T) == before


async def test_naming_the_fixed_settings_as_they_are_changes_only_the_rate(
    broker: BrokerContext,
) -> None:
    updated = await control.update_topic(
        broker, pb.UpdateTopicRequest(name=T, kind="priority", priorities=10, max_rate=50.0)
    )
    assert (updated.settings.kind, updated.settings.max_rate) == ("priority", 50.0)


async def test_a_rate_cap_drains_a_backlog_in_priority_order(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a cap of one delivery a millisecond and a backlog of mixed priorities
    await control.update_topic(broker, pb.UpdateTopicRequest(name=T, max_rate=1000.0))
    order = [6, 2, 9, 0, 2, 6, 0, 4]
    for n, p in enumerate(order):
        await send(broker, [f"m{n}"], [p])
        clock.advance(1)
    # When a consumer with room for all takes them as the cap allows
    session = Session(broker, T, "c1", credits=100)
    await settle_down()
    for _ in range(40):
        clock.advance(1)
        await settle_down()
    # Then all came, most urgent first, and their wait is measured (not as lateness)
    assert [d.priority for d in session.deliveries] == sorted(order)
    assert session.ids[:2] == ["m3", "m6"]
    assert broker.metrics.priority_wait._series[T].counts.sum() == len(order)
    assert not broker.metrics.capped_lateness._series.get(T) or not any(
        broker.metrics.capped_lateness._series[T].counts
    )
    await session.close()


async def test_a_dispatcher_promotes_and_leases_only_its_own_buckets(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given messages whose not-before time has come, in every bucket
    ids = [f"b-{n}" for n in range(40)]
    await send(broker, ids, [1] * len(ids), [clock.now + 5] * len(ids))
    clock.advance(5)
    mine = frozenset(range(4))  # of 8: another broker's consumers own the rest
    topic = await broker.topics.get(T)
    # When a dispatcher of this broker serves only buckets 0..3 (as in a cluster)
    broker.coordinator.buckets = lambda name: mine  # type: ignore[method-assign]
    session = Session(broker, T, "c1", credits=100)
    await settle_down()
    # Then it delivered exactly the messages of its buckets, and left the others
    # where they were: not ranked (not available-looking) by a broker that does
    # not serve them
    stored = {i: await broker.storage.get(T, i) for i in ids}
    ours = {i for i, m in stored.items() if m.bucket in mine}
    assert set(session.ids) == ours and ours
    assert all(stored[i].timestamp == clock.now for i in ids if i not in ours)
    assert topic.settings.buckets == 8
    await session.close()


async def test_the_lag_gauge_reads_a_rank_as_the_time_its_message_waited(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # (every backend: tests/broker/test_gauges_lag.py)
    await send(broker, ["waiting"], [3])
    clock.advance(2)
    await refresh(broker)
    gauges = broker.metrics.topic_gauges(T)
    assert gauges.lag._value.get() == 0.002
    assert gauges.messages[1]._value.get() == 1  # due


@pytest.mark.parametrize("max_deliveries", [0, 1])
async def test_a_hand_back_puts_a_message_back_at_its_rank(
    broker: BrokerContext, clock: ManualClock, max_deliveries: int
) -> None:
    # Given a message leased for a consumer that left before it was sent (an
    # at-most-once one is deleted as it is leased)
    topic = await broker.topics.get(T)
    batch = encode_messages([0], [b"p"], ["held"], [max_deliveries], priorities=[6])
    await produce(broker, pb.ProduceRequest(topic=T, batch=batch))
    ranked = (await broker.storage.get(T, "held")).timestamp
    leases = await broker.storage.lease(LeaseRequest.of(T, None, clock.now, 10, LEASE, "gone"))
    (held,) = leases.delivered
    # When the dispatcher hands it back
    await broker.dispatcher(topic).hand_back("gone", list(leases.delivered))
    # Then it is available again at its own rank and priority, unleased
    back = await broker.storage.get(T, "held")
    assert (back.timestamp, back.priority, back.lease_owner) == (ranked, 6, None)
    assert held.priority == 6
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    assert [(d.id, d.priority, d.timestamp) for d in session.deliveries] == [("held", 6, clock.now)]
    await session.close()
