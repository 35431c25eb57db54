"""The retention sweep forgets tombstones older than their topic's dedup window."""

from __future__ import annotations

from dejaq.broker.retention import sweep
from dejaq.core.clock import now_ms
from dejaq.core.model import InsertStatus, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.memory import MemoryStorage

WINDOW = 60_000


async def given_cancelled(storage: MemoryStorage, topic: str, id: str, at: int) -> None:
    [status] = await storage.insert(topic, [NewMessage(id, at + 10 * WINDOW, b"", 0)])
    assert status is InsertStatus.ACCEPTED
    await storage.cancel(topic, id, 1, at)


async def test_the_sweep_forgets_tombstones_past_the_window_in_batches() -> None:
    # given a topic with a one-minute window, three ids deleted two minutes ago
    # and one deleted just now, and a topic without a window
    storage = MemoryStorage()
    await storage.create_topic(Topic("t", TopicSettings(buckets=1, dedup_window_ms=WINDOW)))
    await storage.create_topic(Topic("off", TopicSettings(buckets=1, dedup_window_ms=0)))
    now = now_ms()
    for id in ("old-1", "old-2", "old-3"):
        await given_cancelled(storage, "t", id, now - 2 * WINDOW)
    await given_cancelled(storage, "t", "recent", now)
    # when the sweep runs, forgetting at most two a call
    forgotten = await sweep(storage, batch=2)
    # then the old ids are free again and the recent one still taken
    assert forgotten == 3
    again = [NewMessage(id, now, b"", 0) for id in ("old-1", "old-2", "old-3", "recent")]
    assert await storage.insert("t", again) == [InsertStatus.ACCEPTED] * 3 + [
        InsertStatus.DUPLICATE
    ]
