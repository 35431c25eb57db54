"""What the redis:// stories share: a storage opened on a URL, the session's server
emptied (or one of a test's own), messages in the buckets the broker would give them."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from dejaq.core.buckets import bucket_of
from dejaq.core.model import InsertStatus, NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis.storage import RedisStorage
from tests.redis_server import RedisServer
from tests.storage_plugins.opening import opened_as

T = "timeline"
NOW = 1_000_000
LEASE = 1_000
HANG_GUARD_S = 5.0  # a call that fails must fail well within this
ACCEPTED = InsertStatus.ACCEPTED


def msg(id: str, ts: int = NOW, buckets: int = 8, **kw: int) -> NewMessage:
    """A message in the bucket the broker would give it."""
    return NewMessage(id, ts, id.encode(), bucket_of(id, buckets), **kw)


def opened(url: str) -> AbstractAsyncContextManager[RedisStorage]:
    return opened_as(RedisStorage, url)


async def given_topic(storage: RedisStorage, buckets: int = 8) -> None:
    await storage.create_topic(Topic(T, TopicSettings(buckets=buckets, lease_ms=LEASE)))


def heads_and_timelines(
    server: RedisServer, slots: int
) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    """Per slot: its heads index, and each timeline's (and key lane's) earliest
    score, read raw, by lane id (``keys.lane``)."""
    heads: dict[int, dict[str, int]] = {}
    firsts: dict[int, dict[str, int]] = {}
    with server.client() as client:
        for i in range(slots):
            slot = redis_keys.Slot(T, i, slots)
            heads[i] = {
                b.decode(): int(s) for b, s in client.zrange(slot.heads, 0, -1, withscores=True)
            }
            firsts[i] = {}
            start = slot.timeline(0)[:-1]
            for key in client.keys(start + "*"):
                [(_, score)] = client.zrange(key, 0, 0, withscores=True)
                firsts[i][key.decode()[len(start) :]] = int(score)
    return heads, firsts
