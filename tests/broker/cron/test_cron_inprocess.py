"""Cron entries in-process, on a manual clock: occurrences are produced ahead and
delivered at their millisecond, each once, through pause, resume, update,
delete, a firing repeated after a lost lease, and an outage."""

from __future__ import annotations

import pytest

from dejaq.broker.api import control
from dejaq.broker.context import BrokerContext
from dejaq.broker.cron import control as cron
from dejaq.broker.cron.entries import LEAD_MS, companion
from dejaq.core.errors import AlreadyExists, InvalidArgument, NotFound
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb
from tests.broker.cron.support import START, T, add, run_for
from tests.broker.inprocess import ManualClock, Session, settle_down

pytestmark = pytest.mark.timeout(60)


async def test_occurrences_arrive_at_their_millisecond_each_once(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer, and an entry every 10 s
    session = Session(broker, T, "c1", credits=100)
    entry = await add(broker, "tick", "*/10 * * * * *")
    assert entry.next_ms == START + 10_000
    # When a minute passes
    await run_for(clock, session, 60_000)
    # Then each occurrence arrived once, with its deterministic id and payload
    ids = session.ids
    assert ids == [f"tick@{START + k * 10_000}" for k in range(1, 7)]
    assert {d.payload for d in session.deliveries} == {b"p"}
    # and the next one is already produced (ahead by the lead), not yet delivered
    info = await cron.get(broker, pb.CronGetRequest(topic=T, id="tick", upcoming=3))
    assert info.entry.next_ms > clock.now + LEAD_MS - 10_000
    assert info.upcoming_ms[0] == info.entry.next_ms
    await session.close()


async def test_pause_update_resume_and_delete(broker: BrokerContext, clock: ManualClock) -> None:
    session = Session(broker, T, "c1", credits=100)
    await add(broker, "tick", "*/10 * * * * *")
    await run_for(clock, session, 20_000)
    # When paused, only what was already produced (within the lead) still arrives
    paused = await cron.update(broker, pb.CronUpdateRequest(topic=T, id="tick", paused=True))
    assert paused.paused and paused.next_ms == 0
    before = len(session.ids)
    await run_for(clock, session, 60_000)
    assert len(session.ids) - before <= (LEAD_MS + 5_000) // 10_000 + 1
    stalled = len(session.ids)
    await run_for(clock, session, 30_000)
    assert len(session.ids) == stalled
    # When resumed with a new payload, it goes on from now, with the new payload
    req = pb.CronUpdateRequest(topic=T, id="tick", paused=False, payload=b"new")
    resumed = await cron.update(broker, req)
    assert resumed.next_ms >= clock.now
    await run_for(clock, session, 30_000)
    assert [d.payload for d in session.deliveries[stalled:]] == [b"new"] * 3
    assert len(set(session.ids)) == len(session.ids)
    # When deleted, nothing more is produced after what was
    await cron.delete(broker, pb.CronDeleteRequest(topic=T, id="tick"))
    await run_for(clock, session, LEAD_MS + 10_000)
    done = len(session.ids)
    await run_for(clock, session, 30_000)
    assert len(session.ids) == done
    with pytest.raises(NotFound):
        await cron.get(broker, pb.CronGetRequest(topic=T, id="tick"))
    await session.close()


async def test_a_repeated_firing_produces_nothing_twice(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given an entry fired once (its occurrences produced)
    session = Session(broker, T, "c1", credits=100)
    await add(broker, "tick", "*/10 * * * * *")
    await settle_down()
    assert broker.cron is not None
    (firer,) = broker.cron._firers.values()
    message = await broker.storage.get(companion(T), "tick")
    # When the same lease's batch is fired again (a broker that lost its lease
    # and the next one both fire it)
    from dejaq.core.model import LeasedMessage

    again = LeasedMessage(message.id, message.timestamp, message.payload, message.version, 1)
    await firer.fire([again])
    await run_for(clock, session, 40_000)
    # Then each occurrence is on the topic and delivered once
    assert len(session.ids) == len(set(session.ids)) == 4
    await session.close()


async def test_an_outage_follows_the_misfire_policy(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given minutely entries with each policy, then the whole service down 10 minutes
    for policy, name in (
        (pb.CronEntry.SKIP, "skip"),
        (pb.CronEntry.ONCE, "once"),
        (pb.CronEntry.ALL, "all"),
    ):
        await add(broker, name, "* * * * *", misfire=policy, misfire_limit=3)
    await settle_down()
    clock.advance(10 * 60_000)  # the firers missed every firing meanwhile
    session = Session(broker, T, "c1", credits=100)
    await run_for(clock, session, 5_000)
    # Then: skip drops the missed ones, once produces the latest, all the latest three
    late = {}
    for d in session.deliveries:
        late.setdefault(d.id.split("@")[0], []).append(int(d.id.split("@")[1]))
    due = START + 10 * 60_000  # due now (1 ms ago): produced as usual by every policy
    missed = [START + m * 60_000 for m in range(1, 10)]
    assert late["skip"] == [due]
    assert late["once"] == [missed[-1], due]
    assert late["all"] == [*missed[-3:], due]
    await session.close()


async def test_bad_entries_are_refused_and_change_nothing(broker: BrokerContext) -> None:
    await add(broker, "ok", "0 9 * * *")
    bad = [
        pb.CronEntry(topic=T, id="x", schedule="61 * * * *"),
        pb.CronEntry(topic=T, id="x", schedule="* * * * *", timezone="Mars/Base"),
        pb.CronEntry(topic=T, id="bad@id", schedule="* * * * *"),
        pb.CronEntry(topic=T, id="x", schedule="* * * * *", start_ms=10, end_ms=5),
        pb.CronEntry(topic=T, id="x", schedule="* * * * *", misfire=7),
        pb.CronEntry(topic=T, id="x", schedule="* * * * *", misfire_limit=100_000),
    ]
    for req in bad:
        with pytest.raises(InvalidArgument):
            await cron.add(broker, req)
    with pytest.raises(InvalidArgument, match="cron start: timestamp 1795000000 is before"):
        await cron.add(
            broker, pb.CronEntry(topic=T, id="x", schedule="* * * * *", start_ms=1_795_000_000)
        )
    with pytest.raises(AlreadyExists):
        await add(broker, "ok", "* * * * *")
    with pytest.raises(NotFound):
        await cron.add(broker, pb.CronEntry(topic="nope", id="x", schedule="* * * * *"))
    with pytest.raises(InvalidArgument):
        await cron.update(broker, pb.CronUpdateRequest(topic=T, id="ok", schedule="* *"))
    listed = await cron.list_(broker, pb.CronListRequest(topic=T))
    assert [(e.id, e.schedule) for e in listed.entries] == [("ok", "0 9 * * *")]


async def test_a_deleted_topic_takes_its_entries(broker: BrokerContext) -> None:
    await add(broker, "ok", "0 9 * * *")
    await control.delete_topic(broker, pb.DeleteTopicRequest(name=T))
    with pytest.raises(NotFound):
        await broker.storage.get_topic(companion(T))
    listed = await control.list_topics(broker, pb.ListTopicsRequest())
    assert not listed.topics


async def test_occurrences_expire_as_produced_messages_do(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a topic whose messages expire 5 s after they are due, and an entry on it
    settings = settings_to_pb(TopicSettings(buckets=8, expiry_ms=5_000))
    await control.create_topic(broker, pb.CreateTopicRequest(name="brief", settings=settings))
    await add(broker, "tick", "*/10 * * * * *", topic="brief")
    # When its first occurrence is produced (ahead of its time)
    await settle_down()
    first = START + 10_000
    # Then it carries the topic's expiry, counted from its time, as a produced one would
    got = await control.get_message(broker, pb.GetMessageRequest(topic="brief", id=f"tick@{first}"))
    assert (got.state, got.timestamp_ms, got.expires_at_ms) == ("waiting", first, first + 5_000)
    # and, with no consumer, it is dead once that has passed
    clock.advance(first + 5_000 - clock.now)
    await settle_down()
    session = Session(broker, "brief", "c1", credits=10)
    await settle_down()
    assert session.ids == []
    await session.close()
