"""scan: one bucket's messages, live and dead, paged by id."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.model import Message
from dejaq.storage_plugins import Storage
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


async def scan_all(storage: Storage, bucket: int, limit: int) -> tuple[list[Message], int]:
    """Every message of ``bucket``, page by page; and how many pages it took."""
    out: list[Message] = []
    after, pages = "", 0
    while True:
        page = await storage.scan(T, bucket, after, limit)
        pages += 1
        assert len(page.messages) <= limit
        assert [m.id for m in page.messages] == sorted(m.id for m in page.messages)
        out += page.messages
        if page.after_id is None:
            return out, pages
        assert page.after_id > after
        after = page.after_id


async def test_scan_pages_one_bucket_by_id_live_and_dead(storage: Storage) -> None:
    # given bucket 1 with waiting, leased and dead messages, and bucket 2 with others
    await given_topic(storage, buckets=4)
    names = [f"m{n:02d}" for n in range(11)]
    await given_messages(
        storage,
        *(msg(n, NOW + 100 + k, bucket=1) for k, n in enumerate(names)),
        msg("gone", NOW - 5, bucket=1, expires_at=1),
        msg("held", NOW - 1, bucket=1),
        msg("other", NOW + 1, bucket=2),
    )
    leases = await lease(storage, buckets=[1])
    assert [d.id for d in leases.delivered] == ["held"] and leases.dead_lettered == 1

    # when the bucket is read three messages a page
    found, pages = await scan_all(storage, 1, 3)

    # then every message of the bucket comes once, by id, with its state
    assert [m.id for m in found] == sorted([*names, "gone", "held"])
    assert pages >= 5
    by_id = {m.id: m for m in found}
    assert by_id["held"].lease_owner == C1 and by_id["held"].timestamp == NOW + LEASE
    assert by_id["held"].deliveries == 1 and by_id["held"].version == 2
    assert by_id["gone"].dead and by_id["gone"].payload == b"gone"
    assert by_id["m03"].timestamp == NOW + 103 and by_id["m03"].payload == b"m03"
    assert all(m.bucket == 1 for m in found)
    assert [m.id for m in (await scan_all(storage, 2, 100))[0]] == ["other"]


async def test_scan_of_an_empty_or_missing_bucket_ends_at_once(storage: Storage) -> None:
    await given_topic(storage, buckets=4)
    await given_messages(storage, msg("a", bucket=0))
    for bucket in (3, 4, 1000):
        page = await storage.scan(T, bucket, "", 10)
        assert page.messages == [] and page.after_id is None


async def test_scan_continues_after_the_cursor_whatever_changed(storage: Storage) -> None:
    # given a bucket read up to "b"
    await given_topic(storage, buckets=1)
    await given_messages(storage, *(msg(n, NOW + 10) for n in "abcde"))
    first = await storage.scan(T, 0, "", 2)
    assert [m.id for m in first.messages] == ["a", "b"] and first.after_id == "b"
    # when "a" and "d" are cancelled and "c" moved
    await storage.cancel(T, "a", 1, NOW)
    await storage.cancel(T, "d", 1, NOW)
    await storage.move(T, "c", 1, NOW + 99, NOW)
    # then the next page starts after "b" and sees the bucket as it is now
    rest = await storage.scan(T, 0, first.after_id, 10)
    assert [(m.id, m.timestamp) for m in rest.messages] == [("c", NOW + 99), ("e", NOW + 10)]
    assert rest.after_id is None


async def test_scan_reads_what_entered_the_bucket_after_the_cursor(storage: Storage) -> None:
    # given a bucket read up to "b"
    await given_topic(storage, buckets=1)
    await given_messages(storage, *(msg(n, NOW + 10) for n in "abdf"))
    first = await storage.scan(T, 0, "", 2)
    assert first.after_id == "b"
    # when "c" and "e" enter it, and "0" before the cursor
    await given_messages(storage, *(msg(n, NOW + 10) for n in "ce0"))
    # then the next pages read the new ones in their places, the earlier one not
    rest, _ = await scan_all_after(storage, 0, first.after_id, 2)
    assert [m.id for m in rest] == ["c", "d", "e", "f"]


async def scan_all_after(
    storage: Storage, bucket: int, after: str, limit: int
) -> tuple[list[Message], int]:
    out: list[Message] = []
    pages = 0
    while True:
        page = await storage.scan(T, bucket, after, limit)
        pages += 1
        out += page.messages
        if page.after_id is None:
            return out, pages
        after = page.after_id


async def test_scan_of_a_missing_topic_or_a_bad_limit_is_refused(storage: Storage) -> None:
    with pytest.raises(NotFound):
        await storage.scan("nope", 0, "", 10)
    await given_topic(storage)
    with pytest.raises(InvalidArgument):
        await storage.scan(T, 0, "", 0)
