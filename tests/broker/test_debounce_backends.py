"""A trailing debounce end to end, on every backend: one id produced a thousand
times over ten seconds with replace is delivered once, at the last due time,
with the last payload.

The broker runs in-process over each backend's real storage (servers from the
session fixtures) with a manual clock: the ten seconds of the story pass as
the test moves the clock, so the span costs no wall time, and "never early"
is checked at the exact millisecond.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dejaq.broker.api import control
from dejaq.broker.api.produce import produce
from dejaq.core.model import InsertStatus, TopicSettings
from dejaq.core.wire.batches import decode_results, encode_messages
from dejaq.core.wire.convert import settings_to_pb
from dejaq.proto import dejaq_pb2 as pb
from dejaq.storage_plugins import storage_from_url
from tests.storage_plugins.conftest import BACKENDS

from .inprocess import ManualClock, Session, make_broker, settle_down, stop

pytestmark = pytest.mark.timeout(120)
T = "digests"
PRODUCES, EVERY_MS, AFTER_MS = 1_000, 10, 500  # 1,000 produces over 10 s, each due 500 ms on


async def _until(condition: Callable[[], bool], what: str, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres", "redis"])
async def test_a_thousand_replaces_of_one_id_deliver_once_the_last(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    storage = storage_from_url(BACKENDS[backend](request, tmp_path))
    await storage.open()
    clock = ManualClock()
    broker = await make_broker(clock, storage=storage)
    try:
        settings = settings_to_pb(TopicSettings(buckets=4, lease_ms=1_000))
        await control.create_topic(broker, pb.CreateTopicRequest(name=T, settings=settings))
        session = Session(broker, T, "c1", credits=10)
        await settle_down()
        # When one id is produced a thousand times over ten seconds, each time due
        # half a second later, replacing
        statuses = []
        for i in range(PRODUCES):
            frame = encode_messages([clock.now + AFTER_MS], [b"v%d" % i], ["digest"])
            request_ = pb.ProduceRequest(topic=T, batch=frame, on_duplicate=pb.ON_DUPLICATE_REPLACE)
            statuses += decode_results((await produce(broker, request_)).results)[0]
            clock.advance(EVERY_MS)
        last_due = clock.now - EVERY_MS + AFTER_MS
        # Then the first stored it and every other replaced it, and nothing went out
        assert statuses == [InsertStatus.ACCEPTED] + [InsertStatus.REPLACED] * (PRODUCES - 1)
        clock.advance(last_due - 1 - clock.now)
        await settle_down()
        assert session.deliveries == []
        # When the last due time comes, it is delivered once, with the last payload
        clock.advance(1)
        await _until(lambda: len(session.deliveries) > 0, "the delivery")
        (d,) = session.deliveries
        assert (d.id, d.timestamp, d.payload) == ("digest", last_due, b"v%d" % (PRODUCES - 1))
        assert session.sent_at[0] >= last_due
        session.ack([d])
        await _until(lambda: len(session.settled) == 1, "the ack")
        clock.advance(5_000)
        await settle_down()
        assert len(session.deliveries) == 1
        await session.close()
    finally:
        await stop(broker)
