"""The cron tests' broker: in-process over ``memory://`` on a manual clock, its
firers running, with a timeline ``T`` (``support.py``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dejaq.broker.api import control
from dejaq.broker.context import BrokerContext
from dejaq.broker.cron.firers import CronFirers
from dejaq.core.model import TopicSettings
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb
from tests.broker.cron.support import START, T
from tests.broker.inprocess import ManualClock, make_broker


@pytest.fixture
async def clock() -> ManualClock:
    return ManualClock(START + 1)


@pytest.fixture
async def broker(clock: ManualClock) -> AsyncIterator[BrokerContext]:
    broker = await make_broker(clock, lookahead_ms=0)
    broker.cron = CronFirers(broker)
    settings = settings_to_pb(TopicSettings(buckets=8))
    await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
    yield broker
    await broker.cron.stop()
    for d in list(broker.dispatchers):
        await broker.drop_dispatcher(d, RuntimeError("test over"))
    await broker.storage.close()
