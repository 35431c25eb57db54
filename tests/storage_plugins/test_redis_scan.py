"""A redis:// scan reads a bucket's timeline once, not once a page, and a
page never relies on an order kept while another process added to the bucket."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.redis import keys as redis_keys
from dejaq.storage_plugins.redis.scripts import Call, Runner
from tests.redis_server import RedisServer
from tests.storage_plugins.redis_support import ACCEPTED, NOW, T, given_topic, msg, opened

BUCKETS = 4


async def read_bucket(storage: Any, bucket: int, limit: int) -> tuple[list[str], int]:
    ids: list[str] = []
    after: str | None = ""
    pages = 0
    while after is not None:
        page = await storage.scan(T, bucket, after, limit)
        ids += [m.id for m in page.messages]
        after = page.after_id
        pages += 1
    return ids, pages


def counting_timeline_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the members that whole-timeline reads (ZRANGE 0 -1) sent back
    (timelines and lanes, not the ``heads`` index naming them)."""
    members = [0]
    run = Runner.run

    async def counting(self: Runner, calls: Sequence[Call], **kw: Any) -> list[Any]:
        replies = await run(self, calls, **kw)
        for call, reply in zip(calls, replies, strict=True):
            timeline = call.args[1:] and f":{redis_keys.TIMELINE}" in str(call.args[1])
            if call.script is None and call.args[0] == "ZRANGE" and timeline:
                members[0] += len(reply)
        return replies

    monkeypatch.setattr(Runner, "run", counting)
    return members


async def test_a_bucket_read_in_many_pages_reads_its_timeline_once(
    server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with opened(server.url) as storage:
        # given a topic of 4 buckets and 2,000 messages
        await given_topic(storage, buckets=BUCKETS)
        batch = [msg(f"m{i:05d}", NOW + i, buckets=BUCKETS) for i in range(2_000)]
        assert await storage.insert(T, batch) == [ACCEPTED] * len(batch)
        bucket = batch[0].bucket
        expected = sorted(m.id for m in batch if m.bucket == bucket)
        members = counting_timeline_reads(monkeypatch)
        # when one bucket is read 10 at a time
        ids, pages = await read_bucket(storage, bucket, 10)
    # then every message of it comes once, in order, and its timeline was
    # read whole once for the read, not once for each page
    assert ids == expected
    assert pages == -(-len(expected) // 10)
    assert members[0] == len(expected)


async def test_a_page_reads_what_another_process_added_after_the_cursor(
    server: RedisServer,
) -> None:
    async with opened(server.url) as reader, opened(server.url) as writer:
        # given a bucket read up to its 10th message by one process
        await given_topic(reader, buckets=1)
        await reader.insert(T, [msg(f"m{i:03d}", NOW, buckets=1) for i in range(0, 100, 2)])
        first = await reader.scan(T, 0, "", 10)
        assert first.after_id == "m018"
        # when another adds messages to the bucket, after the cursor and before it
        added = [msg(id, NOW, buckets=1) for id in ("m019", "m021", "m005")]
        assert await writer.insert(T, added) == [ACCEPTED] * 3
        # then the reader's next page reads them in their places
        page = await reader.scan(T, 0, first.after_id, 4)
    assert [m.id for m in page.messages] == ["m019", "m020", "m021", "m022"]


async def test_a_page_reads_a_message_redriven_after_the_first_page(server: RedisServer) -> None:
    async with opened(server.url) as storage:
        # given a bucket with one dead message, read up to its 10th message
        await given_topic(storage, buckets=1)
        await storage.insert(T, [msg(f"m{i:03d}", NOW + 10, buckets=1) for i in range(20)])
        await storage.cancel(T, "m015", 1, NOW)
        await storage.insert(T, [msg("m015x", NOW - 1, buckets=1, expires_at=1)])
        leases = await storage.lease(LeaseRequest.of(T, None, NOW, 10, 1_000, "c1", 0))
        assert leases.dead_lettered == 1
        first = await storage.scan(T, 0, "", 10)
        assert first.after_id == "m009"
        # when the dead message is put back on the timeline
        assert await storage.redrive(T, ["m015x"], NOW + 10) == 1
        # then the next pages read it in its place
        rest, _ = await read_after(storage, first.after_id, 3)
    assert [m for m in rest if m.startswith("m015")] == ["m015x"]
    assert len(rest) == 10


async def read_after(storage: Any, after: str | None, limit: int) -> tuple[list[str], int]:
    ids: list[str] = []
    pages = 0
    while after is not None:
        page = await storage.scan(T, 0, after, limit)
        ids += [m.id for m in page.messages]
        after = page.after_id
        pages += 1
    return ids, pages
