"""Limits per key in-process, on a manual clock over ``memory://``: a key never
has more held than its concurrency nor delivers faster than its rate, while
other keys and the unkeyed messages flow; overrides set at run time apply at once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from dejaq.broker.api import control, keys
from dejaq.broker.context import BrokerContext
from dejaq.broker.dispatch.dispatcher import KEY_WAIT_MS
from dejaq.core.buckets import bucket_of
from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import LeasedMessage, NewMessage, TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import ManualClock, Session, running_broker, settle_down

pytestmark = pytest.mark.timeout(60)
T = "reminders"
BUCKETS = 8
LEASE_MS = 1_000


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    async with running_broker(clock, lookahead_ms=0, send_ahead_ms=0) as broker:
        yield broker


async def given_topic(broker: BrokerContext, **settings: object) -> None:
    s = settings_to_pb(TopicSettings(buckets=BUCKETS, lease_ms=LEASE_MS, **settings))  # type: ignore[arg-type]
    await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=s))


async def given_due(broker: BrokerContext, key: str, n: int, at: int) -> list[str]:
    """``n`` messages of ``key`` due at ``at``; their ids."""
    ids = [f"{key or 'none'}-{i}" for i in range(n)]
    msgs = [NewMessage(i, at, b"x", bucket_of(i, BUCKETS), key=key) for i in ids]
    await broker.storage.insert(T, msgs)
    broker.hint(T, at)
    return ids


def of_key(session: Session, prefix: str) -> list[LeasedMessage]:
    return [d for d in session.deliveries if d.id.startswith(prefix + "-")]


async def held_of(broker: BrokerContext, key: str) -> int:
    loads = {k.key: k for k in await broker.storage.keys(T, broker.clock.now_ms(), 100)}
    return loads[key].held if key in loads else 0


async def run(clock: ManualClock, ms: int) -> None:
    for _ in range(ms):
        clock.advance(1)
        await settle_down()


async def ack(session: Session, ds: Sequence[LeasedMessage]) -> None:
    session.ack(ds, credits=len(ds))
    await settle_down()


async def test_a_key_never_has_more_held_than_its_concurrency_while_others_flow(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a topic limiting each key to 3 held at once, and a consumer with room
    # for everything; a campaign of 50 due now beside another key's 4 and 5 unkeyed
    await given_topic(broker, key_concurrency=3)
    session = Session(broker, T, "c1", credits=1_000)
    await settle_down()
    now = clock.now
    await given_due(broker, "campaign", 50, now)
    await given_due(broker, "alice", 4, now)
    await given_due(broker, "", 5, now)
    # When the broker runs a while with nothing acked
    await run(clock, 20)
    # Then the campaign and alice have 3 each out, the unkeyed messages all went
    assert len(of_key(session, "campaign")) == 3
    assert len(of_key(session, "alice")) == 3
    assert len(of_key(session, "none")) == 5
    assert await held_of(broker, "campaign") == 3
    # And each ack lets one more of that key go, never more than 3 held
    for _ in range(5):
        out = of_key(session, "campaign")
        await ack(session, out[-1:])
        await run(clock, 2)
        assert await held_of(broker, "campaign") <= 3
    assert len(of_key(session, "campaign")) == 8
    assert all(d.timestamp <= clock.now for d in session.deliveries)
    await session.close()


async def test_a_lease_that_runs_out_stops_counting(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a key at its concurrency of 2, its consumer settling nothing
    await given_topic(broker, key_concurrency=2)
    session = Session(broker, T, "c1", credits=1_000)
    await settle_down()
    await given_due(broker, "k", 10, clock.now)
    await run(clock, 5)
    assert len(of_key(session, "k")) == 2
    # When their leases run out
    await run(clock, LEASE_MS + 5)
    # Then the key's next messages (or the same again) go out: 2 held again, not 0
    assert len(of_key(session, "k")) == 4
    assert await held_of(broker, "k") == 2
    await session.close()


async def test_a_key_delivers_no_faster_than_its_rate_plus_its_burst(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a rate of 20 a second with a burst of 5 per key, and 100 due now
    await given_topic(broker, key_rate=20.0, key_burst=5)
    session = Session(broker, T, "c1", credits=1_000)
    await settle_down()
    await given_due(broker, "k", 100, clock.now)
    await given_due(broker, "other", 3, clock.now)
    # When the broker runs 2 seconds, each delivery acked at once
    sent_at: dict[str, int] = {}
    for _ in range(2_000):
        clock.advance(1)
        await settle_down()
        fresh = [d for d in session.deliveries if d.id not in sent_at]
        for d in fresh:
            sent_at[d.id] = clock.now
        if fresh:
            await ack(session, fresh)
    # Then no window of a second sent more than 20 + 5 of the key
    times = sorted(t for i, t in sent_at.items() if i.startswith("k-"))
    worst = max(sum(1 for t in times if s <= t < s + 1_000) for s in times)
    assert worst <= 25
    assert len(times) >= 40  # about 5 + 20 a second
    assert len(of_key(session, "other")) == 3  # other keys are not held up
    await session.close()


async def test_an_override_set_at_run_time_applies_at_once(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given no limit on the topic, and a key's override of 1 held at once
    await given_topic(broker)
    shown = await keys.set_limit(broker, pb.SetKeyLimitRequest(topic=T, key="vip", concurrency=1))
    assert (shown.overridden, shown.concurrency) == (True, 1)
    session = Session(broker, T, "c1", credits=1_000)
    await settle_down()
    await given_due(broker, "vip", 5, clock.now)
    await given_due(broker, "free", 5, clock.now)
    await run(clock, 5)
    assert (len(of_key(session, "vip")), len(of_key(session, "free"))) == (1, 5)
    # When the override is raised to 3 at run time
    await keys.set_limit(broker, pb.SetKeyLimitRequest(topic=T, key="vip", concurrency=3))
    await run(clock, 5)
    # Then 3 are held; and removing the override lifts the limit (the topic has none)
    assert len(of_key(session, "vip")) == 3
    await keys.remove_limit(broker, pb.KeyLimitRequest(topic=T, key="vip"))
    await run(clock, 5)
    assert len(of_key(session, "vip")) == 5
    stored = await broker.storage.get_topic(T)
    assert stored.settings.key_limits == ()
    await session.close()


@pytest.mark.parametrize(
    "limit",
    [
        pb.SetKeyLimitRequest(topic=T, key="", concurrency=1),
        pb.SetKeyLimitRequest(topic=T, key="k"),
        pb.SetKeyLimitRequest(topic=T, key="k", rate=-1.0),
        pb.SetKeyLimitRequest(topic=T, key="k", rate=float("nan")),
        pb.SetKeyLimitRequest(topic=T, key="k\x00", concurrency=1),
        pb.SetKeyLimitRequest(topic=T, key="k", concurrency=2_000_000),
    ],
)
async def test_a_bad_override_is_refused_and_changes_nothing(
    broker: BrokerContext, limit: pb.SetKeyLimitRequest
) -> None:
    await given_topic(broker, key_concurrency=4)
    with pytest.raises(InvalidArgument):
        await keys.set_limit(broker, limit)
    assert (await broker.storage.get_topic(T)).settings.key_limits == ()


async def test_removing_an_override_a_key_does_not_have_is_not_found(
    broker: BrokerContext,
) -> None:
    await given_topic(broker)
    with pytest.raises(NotFound):
        await keys.remove_limit(broker, pb.KeyLimitRequest(topic=T, key="nobody"))


@pytest.mark.parametrize(
    "request_",
    [
        pb.UpdateTopicRequest(name=T, key_rate=-1.0),
        pb.UpdateTopicRequest(name=T, key_rate=float("inf")),
        pb.UpdateTopicRequest(name=T, key_concurrency=5_000_000),
    ],
)
async def test_a_bad_topic_limit_is_refused_and_changes_nothing(
    broker: BrokerContext, request_: pb.UpdateTopicRequest
) -> None:
    await given_topic(broker, key_concurrency=4)
    with pytest.raises(InvalidArgument):
        await control.update_topic(broker, request_)
    s = (await broker.storage.get_topic(T)).settings
    assert (s.key_concurrency, s.key_rate) == (4, 0.0)


async def test_the_busiest_keys_show_backlog_held_lateness_and_limits(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a key with 2 held of its concurrency and 8 due since 100 ms ago
    await given_topic(broker, key_concurrency=2)
    await keys.set_limit(broker, pb.SetKeyLimitRequest(topic=T, key="big", rate=50.0))
    session = Session(broker, T, "c1", credits=1_000)
    await settle_down()
    await given_due(broker, "big", 10, clock.now)
    await given_due(broker, "small", 1, clock.now)
    await run(clock, 100)
    # When the operator asks for the busiest keys
    resp = await keys.busiest(broker, pb.TopicKeysRequest(topic=T))
    # Then the big key leads, late by the time its oldest has waited, with its limits
    first = resp.keys[0]
    assert (first.key, first.due, first.held) == ("big", 8, 2)
    assert first.lateness_ms == resp.now_ms - first.oldest_ms >= 99
    assert (first.concurrency, first.rate) == (2, 50.0)
    await session.close()


async def test_a_key_waiting_at_its_limit_is_looked_at_every_few_ms_not_every_ms(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a key at its concurrency of 1 with 5 more due, nothing else due
    await given_topic(broker, key_concurrency=1)
    session = Session(broker, T, "c1", credits=1_000)
    await settle_down()
    await given_due(broker, "k", 6, clock.now)
    await run(clock, 2)
    assert len(of_key(session, "k")) == 1
    passes: list[str] = []
    broker.storage.on_operation = lambda op, seconds, ok: passes.append(op)
    # When 100 ms go by with its one message unsettled
    await run(clock, 100)
    # Then the dispatcher looked again every few ms (KEY_WAIT_MS), not at every one
    assert 10 <= passes.count("lease") <= 100 // KEY_WAIT_MS + 2
    assert len(of_key(session, "k")) == 1
    # And an ack lets the next one go at once
    await ack(session, of_key(session, "k"))
    await run(clock, 1)
    assert len(of_key(session, "k")) == 2
    await session.close()
