"""Cron entries on a priority topic, in-process on a manual clock: each
occurrence waits until its time, then goes out at its entry's priority; a
misfired one is ranked at once; a priority out of range, or on a timeline, is
refused and changes nothing."""

from __future__ import annotations

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.produce import produce
from dejaq.broker.context import BrokerContext
from dejaq.broker.cron import control as cron
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import KIND_PRIORITY, TopicSettings
from dejaq.core.wire.batches import encode_messages
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb
from tests.broker.cron.support import START, T, add, occurred_at, run_for
from tests.broker.inprocess import ManualClock, Session, settle_down

pytestmark = pytest.mark.timeout(60)
P = "jobs"  # a priority topic: priorities 0 .. 9


@pytest.fixture
async def jobs(broker: BrokerContext) -> str:
    settings = TopicSettings(buckets=8, kind=KIND_PRIORITY, priorities=10)
    await control.create_topic(
        broker, pb.CreateTopicRequest(name=P, settings=settings_to_pb(settings))
    )
    return P


async def produce_now(broker: BrokerContext, ids: list[str], priority: int) -> None:
    """Work available now at ``priority``, one message an id."""
    n = len(ids)
    batch = encode_messages([0] * n, [b"x"] * n, ids, priorities=[priority] * n)
    await produce(broker, pb.ProduceRequest(topic=P, batch=batch))


async def listed(broker: BrokerContext, topic: str) -> list[pb.CronEntry]:
    return list((await cron.list_(broker, pb.CronListRequest(topic=topic))).entries)


async def test_occurrences_go_out_most_urgent_first_and_never_early(
    broker: BrokerContext, clock: ManualClock, jobs: str
) -> None:
    # Given three entries every 10 s at priorities 7, 0 and 3, and a consumer
    session = Session(broker, jobs, "c1", credits=100)
    for id, priority in (("lax", 7), ("urgent", 0), ("mid", 3)):
        entry = await add(broker, id, "*/10 * * * * *", topic=jobs, priority=priority)
        assert entry.priority == priority
    # When 30 s pass (each step checks that nothing came before its occurrence)
    await run_for(clock, session, 30_000)
    # Then each occurrence came at its time, the most urgent first
    times = [START + k * 10_000 for k in (1, 2, 3)]
    assert session.ids == [f"{id}@{t}" for t in times for id in ("urgent", "mid", "lax")]
    assert [d.priority for d in session.deliveries] == [0, 3, 7] * 3
    assert all(d.timestamp == occurred_at(d.id) for d in session.deliveries)
    await session.close()


async def test_an_occurrence_waits_for_its_time_then_ranks_at_its_priority(
    broker: BrokerContext, clock: ManualClock, jobs: str
) -> None:
    # Given an urgent entry every 10 s, produced ahead of its first occurrence
    await add(broker, "urgent", "*/10 * * * * *", topic=jobs, priority=0)
    await settle_down()
    first = START + 10_000
    waiting = await control.get_message(
        broker, pb.GetMessageRequest(topic=jobs, id=f"urgent@{first}")
    )
    assert (waiting.state, waiting.priority, waiting.timestamp_ms) == ("waiting", 0, first)
    # and a backlog of lax work, available now, for a consumer taking one at a time
    await produce_now(broker, ["lax-1", "lax-2"], 9)
    clock.advance(first - 1 - clock.now)
    session = Session(broker, jobs, "c1", credits=1)
    await settle_down()
    # When the consumer takes a lax one a millisecond before the occurrence
    assert session.ids == ["lax-1"]
    # Then, that millisecond later, the occurrence goes before the other lax one
    clock.advance(1)
    session.ack(session.deliveries, credits=1)
    await settle_down()
    assert session.ids == ["lax-1", f"urgent@{first}"]
    assert session.deliveries[-1].timestamp == first
    await session.close()


async def test_a_misfired_occurrence_is_ranked_at_once(
    broker: BrokerContext, clock: ManualClock, jobs: str
) -> None:
    # Given a minutely urgent entry, and lax work available since the start
    await add(broker, "urgent", "* * * * *", topic=jobs, priority=0)
    await settle_down()
    await produce_now(broker, ["lax"], 5)
    # When the whole service was down for 10 minutes (every firing missed)
    clock.advance(10 * 60_000)
    fired_at = clock.now
    session = Session(broker, jobs, "c1", credits=100)
    await settle_down()
    # Then the latest missed occurrence (the once policy) and the one just due
    # are available at once, ranked before the older lax work
    missed, due = START + 9 * 60_000, START + 10 * 60_000
    assert session.ids == [f"urgent@{missed}", f"urgent@{due}", "lax"]
    assert [d.timestamp for d in session.deliveries[:2]] == [fired_at, fired_at]
    await session.close()


async def test_a_new_priority_applies_from_the_next_occurrence_not_yet_produced(
    broker: BrokerContext, clock: ManualClock, jobs: str
) -> None:
    session = Session(broker, jobs, "c1", credits=100)
    await add(broker, "tick", "*/10 * * * * *", topic=jobs, priority=7)
    await run_for(clock, session, 10_000)
    updated = await cron.update(broker, pb.CronUpdateRequest(topic=jobs, id="tick", priority=2))
    assert updated.priority == 2
    await run_for(clock, session, 60_000)
    # The occurrences already produced (within the lead) keep 7, the rest have 2
    priorities = [d.priority for d in session.deliveries]
    assert priorities[0] == 7 and priorities[-1] == 2
    assert priorities == sorted(priorities, reverse=True)
    info = await cron.get(broker, pb.CronGetRequest(topic=jobs, id="tick"))
    assert info.entry.priority == 2
    await session.close()


async def test_a_bad_priority_is_refused_and_changes_nothing(
    broker: BrokerContext, clock: ManualClock, jobs: str
) -> None:
    # Given an entry on the priority topic and one on the timeline
    await add(broker, "ok", "0 9 * * *", topic=jobs, priority=4)
    await add(broker, "ok", "0 9 * * *", topic=T)
    before = {t: await listed(broker, t) for t in (jobs, T)}
    # When priorities out of the topic's range, or any on a timeline, are given
    out_of_range = "priority 10 is out of range for topic 'jobs': 0 (most urgent) .. 9"
    on_a_timeline = "topic 'reports' is a timeline: it takes no priority"
    refused = [
        (pb.CronEntry(topic=jobs, id="x", schedule="* * * * *", priority=10), out_of_range),
        (pb.CronUpdateRequest(topic=jobs, id="ok", priority=10), out_of_range),
        (pb.CronEntry(topic=T, id="x", schedule="* * * * *", priority=1), on_a_timeline),
        (pb.CronUpdateRequest(topic=T, id="ok", priority=1), on_a_timeline),
    ]
    for req, message in refused:
        with pytest.raises(InvalidArgument) as exc:
            if isinstance(req, pb.CronEntry):
                await cron.add(broker, req)
            else:
                await cron.update(broker, req)
        assert str(exc.value) == message
    # Then every entry is as it was, and none was added
    assert {t: await listed(broker, t) for t in (jobs, T)} == before
    assert [e.priority for e in before[jobs]] == [4]
