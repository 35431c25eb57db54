"""Memory's counts of due messages and its busiest keys read the columns in one
vectorised pass: the same answers as walking the time index's due entries."""

from __future__ import annotations

import random

import pytest

from dejaq.core.model import KIND_PRIORITY, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.memory import storage as memory_storage
from dejaq.storage_plugins.memory import timeline
from dejaq.storage_plugins.memory.storage import MemoryStorage

NOW = 1_000_000


async def given_a_busy_topic(kind: str = "timeline") -> MemoryStorage:
    rng = random.Random(7)
    settings = TopicSettings(
        buckets=8, lease_ms=1_000, kind=kind, priorities=3 if kind != "timeline" else 0
    )
    storage = MemoryStorage("memory://")
    await storage.create_topic(Topic("t", settings))
    messages = [
        NewMessage(
            f"m{i}",
            NOW + rng.randint(-500, 500),
            b"x",
            i % 8,
            key=rng.choice(["", "a", "b", "c"]),
            priority=rng.randint(0, 2) if kind != "timeline" else 0,
        )
        for i in range(2_000)
    ]
    await storage.insert("t", messages)
    if kind != "timeline":
        await storage.promote("t", None, NOW - 200, 300)
    leased = await storage.lease(LeaseRequest.of("t", None, NOW - 100, 400, 150, "c1"))
    await storage.ack("t", [(d.id, d.version) for d in leased.delivered[:100]], "c1", NOW)
    return storage


@pytest.mark.parametrize("kind", ["timeline", KIND_PRIORITY])
async def test_due_counts_from_the_columns_match_the_index(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = await given_a_busy_topic(kind)
    for now in (NOW - 300, NOW, NOW + 60, NOW + 600):
        by_columns = await storage.counts("t", now)
        monkeypatch.setattr(timeline, "DUE_BY_COLUMNS", -1)
        by_index = await storage.counts("t", now)
        monkeypatch.setattr(timeline, "DUE_BY_COLUMNS", 2_000_000)
        assert by_columns == by_index
        assert by_columns.due > 0 or now < NOW - 200


async def test_the_busiest_keys_from_the_columns_match_the_lanes() -> None:
    storage = await given_a_busy_topic()
    tl = storage._tl("t")
    for now in (NOW - 300, NOW, NOW + 600):
        assert memory_storage._key_loads(tl.cols, now) == tl.keyed.loads(now)
