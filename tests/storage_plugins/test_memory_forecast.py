"""The memory forecast's two ways agree: from the time index (stale entries,
slots entered twice, reused slots) and from the columns in slot order, on a
topic churned by leases, moves, nacks, acks and cancels, over ranges near the
index's horizon, in its pulled runs and in its far windows."""

from __future__ import annotations

import random

import pytest

from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import Forecast, LeaseRequest
from dejaq.storage_plugins.memory import MemoryStorage
from dejaq.storage_plugins.memory import forecast as memory_forecast

NOW = 1_800_000_000_000
MINUTE = 60_000


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_the_index_and_the_columns_count_the_same(seed: int) -> None:
    rng = random.Random(seed)
    storage = MemoryStorage()
    await storage.open()
    await storage.create_topic(Topic("t", TopicSettings(buckets=8, lease_ms=30_000), 1))
    # Given messages from now to 3 days ahead, a burst among them
    messages = [
        NewMessage(f"m{i}", NOW + rng.randrange(3 * 24 * 60 * MINUTE), b"x", i % 8)
        for i in range(3000)
    ]
    messages += [NewMessage(f"b{i}", NOW + 5 * MINUTE, b"x", i % 8) for i in range(500)]
    await storage.insert("t", messages)
    now = NOW
    for _ in range(6):
        # When time passes and a pass leases what is due (the index pulls windows)
        now += rng.randrange(1, 10) * MINUTE
        leases = await storage.lease(LeaseRequest.of("t", None, now, 400, 30_000, "c"))
        held = [(d.id, d.version) for d in leases.delivered]
        rng.shuffle(held)
        third = len(held) // 3
        # and some are acked, some nacked into the future, the rest kept leased
        await storage.ack("t", held[:third], "c", now)
        await storage.nack("t", held[third : 2 * third], "c", now + rng.randrange(MINUTE), 0)
        # and waiting ones are moved (one to where it already was) or cancelled
        for m in rng.sample(messages, 20):
            got = await storage.get("t", m.id) if await _exists(storage, m.id) else None
            if got is None or got.lease_owner is not None:
                continue
            at = got.timestamp if rng.random() < 0.3 else now + rng.randrange(60 * MINUTE)
            if rng.random() < 0.2:
                await storage.cancel("t", m.id, got.version, now)
            else:
                await storage.move("t", m.id, got.version, at, now)
        await storage.insert(
            "t", [NewMessage(f"n{now}-{i}", now + i * 997, b"x", i % 8) for i in range(50)]
        )
        # Then both ways count the same, near, mid and far
        tl = storage._tl("t")
        for step, bins in ((1000, 60), (MINUTE, 60), (60 * MINUTE, 72)):
            request = Forecast(now, step, bins)
            by_index = memory_forecast._from_index(tl.lanes, tl.cols, request)
            by_columns = memory_forecast._from_columns(tl.cols, request)
            assert by_index == by_columns
            assert await storage.forecast("t", now, step, bins) == by_columns
    await storage.close()


async def _exists(storage: MemoryStorage, id: str) -> bool:
    tl = storage._tl("t")
    return tl.find_one(id) >= 0 and bool(tl.cols.state[tl.find_one(id)] == 1)


class Unasked:
    """An index that must not be asked: the pass over the columns is cheaper."""

    bucket = 0

    def entries_between(self, start: int, end: int) -> int:
        raise AssertionError("a lane was asked")

    def between(self, start: int, end: int) -> object:
        raise AssertionError("a lane was read")


async def test_a_topic_of_many_lanes_is_counted_from_the_columns() -> None:
    # Given a topic past the small size, with many keys each on its lanes
    storage = MemoryStorage()
    await storage.open()
    await storage.create_topic(Topic("t", TopicSettings(buckets=8, lease_ms=30_000), 1))
    n = memory_forecast.SMALL + 1000
    await storage.insert(
        "t", [NewMessage(f"m{i}", NOW + i, b"x", i % 8, key=f"k{i % 500}") for i in range(n)]
    )
    tl = storage._tl("t")
    request = Forecast(NOW, MINUTE, 3)
    expected = memory_forecast._from_columns(tl.cols, request)
    assert sum(expected) > 0
    # When it has more indexes than the pass over its slots would cost to ask
    lanes = [Unasked()] * (n // memory_forecast.LANE_SLOTS + 1)
    # Then the forecast reads the columns alone, and counts the same
    assert memory_forecast.forecast(lanes, tl.cols, request) == expected  # type: ignore[arg-type]
    await storage.close()
