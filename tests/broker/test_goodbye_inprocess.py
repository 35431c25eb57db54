"""A Goodbye releases the consumer's leases, unless it names deliveries still processed."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.context import BrokerContext
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb

from .inprocess import ManualClock, Session, produce_at, running_broker, settle_down

pytestmark = pytest.mark.timeout(30)
T = "jobs"


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    async with running_broker(clock, lookahead_ms=0) as broker:
        settings = settings_to_pb(TopicSettings(buckets=8, lease_ms=60_000))
        await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
        yield broker


async def leased_to(broker: BrokerContext, mid: str) -> str | None:
    return (await broker.storage.get(T, mid)).lease_owner


async def goodbye(session: Session, keep: list[str]) -> None:
    session.send(pb.ConsumeRequest(goodbye=pb.Goodbye(keep=keep)))
    session.inbound.put_nowait(None)
    await settle_down()


async def test_a_goodbye_releases_every_lease(broker: BrokerContext, clock: ManualClock) -> None:
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    ids = await produce_at(broker, T, [clock.now, clock.now])
    await settle_down()
    assert sorted(session.ids) == sorted(ids)
    await goodbye(session, [])
    assert [await leased_to(broker, m) for m in ids] == [None, None]


async def test_a_goodbye_naming_deliveries_in_hand_releases_nothing(
    broker: BrokerContext, clock: ManualClock
) -> None:
    # Given a consumer holding two messages, still processing one
    session = Session(broker, T, "c1", credits=10)
    await settle_down()
    ids = await produce_at(broker, T, [clock.now, clock.now])
    await settle_down()
    assert sorted(session.ids) == sorted(ids)
    # When it says goodbye naming the one in hand
    await goodbye(session, [ids[0]])
    # Then no lease of it is released: each runs out at its own time
    assert [await leased_to(broker, m) for m in ids] == ["c1", "c1"]
