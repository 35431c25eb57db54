"""The forecast: waiting messages counted in due-time bins ahead of now."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import KIND_PRIORITY, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins import Storage
from dejaq.storage_plugins.base import MAX_FORECAST_BINS, LeaseRequest
from tests.storage_plugins.conformance.givens import (
    C1,
    LEASE,
    NOW,
    T,
    given_messages,
    given_topic,
    lease,
    msg,
)

STEP = 1_000


async def test_counts_waiting_messages_by_due_bin(storage: Storage) -> None:
    # Given messages before, inside and after three one-second bins, in several buckets
    await given_topic(storage)
    await given_messages(
        storage,
        msg("past", NOW - 5),
        msg("first", NOW),
        msg("edge", NOW + STEP - 1, bucket=3),
        msg("second", NOW + STEP, bucket=1),
        msg("third", NOW + 2 * STEP + 500, bucket=2),
        msg("beyond", NOW + 3 * STEP),
        msg("dies", NOW - 9, expires_at=1),
    )
    assert (await lease(storage, NOW - 9, limit=1)).dead_lettered == 1
    # When the forecast is asked, then each bin holds what falls due in it:
    # the past, the dead and what lies beyond are not counted
    assert await storage.forecast(T, NOW, STEP, 3) == [2, 1, 1]
    # and a finer or wider grid counts the same messages
    assert await storage.forecast(T, NOW, 500, 6) == [1, 1, 1, 0, 0, 1]
    assert await storage.forecast(T, NOW, STEP, 4) == [2, 1, 1, 1]


async def test_follows_moves_leases_acks_and_nacks(storage: Storage) -> None:
    # Given a quiet topic and its forecast
    await given_topic(storage)
    await given_messages(
        storage,
        msg("past", NOW - 5),
        msg("now", NOW),
        msg("soon", NOW + 100, bucket=1),
        msg("later", NOW + 2 * STEP + 10, bucket=2),
        msg("cancelled", NOW + STEP, bucket=3),
    )
    assert await storage.forecast(T, NOW, STEP, 3) == [2, 1, 1]
    # When both due messages are leased (their lease runs to NOW + LEASE, in
    # the second bin), one message is moved, another moved to where it was
    # already, and one cancelled
    leased = {d.id: d.version for d in (await lease(storage, NOW)).delivered}
    assert set(leased) == {"past", "now"}
    later = await storage.get(T, "later")
    await storage.move(T, "later", later.version, NOW + 10, NOW)
    soon = await storage.get(T, "soon")
    await storage.move(T, "soon", soon.version, NOW + 100, NOW)
    cancelled = await storage.get(T, "cancelled")
    await storage.cancel(T, "cancelled", cancelled.version, NOW)
    # Then leased messages are no load ahead; moved ones count at their new time, once
    assert NOW + LEASE < NOW + 2 * STEP
    assert await storage.forecast(T, NOW, STEP, 3) == [2, 0, 0]
    # When one leased message is acked and the other nacked into the last bin
    await storage.ack(T, [("now", leased["now"])], C1, NOW)
    await storage.nack(T, [("past", leased["past"])], C1, NOW + 2 * STEP + 1, 0)
    # Then the nacked one is waiting again, at its retry time
    assert await storage.forecast(T, NOW, STEP, 3) == [2, 0, 1]


async def test_counts_a_burst_and_a_spread_exactly(storage: Storage) -> None:
    # Given a campaign burst at one instant and messages spread over days, at
    # realistic times (the time index keeps near and far entries apart)
    now = 1_763_900_000_000
    await given_topic(storage, buckets=8)
    burst = [msg(f"b{i}", now + 60_000, bucket=i % 8) for i in range(600)]
    spread = [msg(f"s{i}", now + i * 7_919_993, bucket=i % 8) for i in range(1, 400)]
    await given_messages(storage, *burst, *spread)
    hour = 3_600_000
    expected = [0] * 72
    for m in [*burst, *spread]:
        if now <= m.timestamp < now + 72 * hour:
            expected[(m.timestamp - now) // hour] += 1
    # When the forecast is asked before anything was leased, then it is exact
    assert await storage.forecast(T, now, hour, 72) == expected
    # When a pass has leased part of the burst (the index moved on to it)
    request = LeaseRequest.of(T, None, now + 60_000, 50, LEASE, C1)
    assert len((await storage.lease(request)).delivered) == 50
    # Then those are no longer waiting, and the rest still is
    assert await storage.forecast(T, now + 60_000, 1, 1) == [550]
    expected[0] -= 50
    assert await storage.forecast(T, now, hour, 72) == expected


async def test_a_priority_topic_counts_messages_when_they_become_available(
    storage: Storage,
) -> None:
    # Given a priority topic with one message available now and two later
    settings = TopicSettings(buckets=4, lease_ms=LEASE, kind=KIND_PRIORITY, priorities=10)
    await storage.create_topic(Topic("jobs", settings, created_at_ms=42))
    messages = [
        NewMessage("soon", NOW + 10, b"", 0, 0, 0, 3),
        NewMessage("later", NOW + 1_500, b"", 1, 0, 0, 0),
        NewMessage("ready", NOW - 10, b"", 2, 0, 0, 5),
    ]
    await storage.insert("jobs", messages)
    assert await storage.promote("jobs", None, NOW, 10) == 1  # "ready" takes its rank
    # Then the forecast counts the others at their not-before time; the ranked
    # one is available already, before the first bin
    assert await storage.forecast("jobs", NOW, STEP, 2) == [1, 1]


BAD_BINS = [(0, 10), (-5, 10), (1_000, 0), (1, MAX_FORECAST_BINS + 1)]


@pytest.mark.parametrize(("step", "bins"), BAD_BINS)
async def test_refuses_bad_bins(storage: Storage, step: int, bins: int) -> None:
    await given_topic(storage)
    with pytest.raises(InvalidArgument):
        await storage.forecast(T, NOW, step, bins)


async def test_a_missing_topic_is_not_found(storage: Storage) -> None:
    with pytest.raises(NotFound):
        await storage.forecast("nowhere", NOW, STEP, 3)
    # and an empty topic forecasts zeros
    await given_topic(storage)
    assert await storage.forecast(T, NOW, STEP, 3) == [0, 0, 0]


async def test_the_widest_forecast_counts_years_ahead(storage: Storage) -> None:
    # Given a message a year ahead, when the most bins of a day each are asked
    await given_topic(storage)
    day = 86_400_000
    await given_messages(storage, msg("next-year", NOW + 365 * day + 5))
    counts = await storage.forecast(T, NOW, day, MAX_FORECAST_BINS)
    # Then the bins run that far, and the message is in its day
    assert len(counts) == MAX_FORECAST_BINS
    assert counts[365] == 1 and sum(counts) == 1
