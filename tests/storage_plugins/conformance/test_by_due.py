"""by_due: a topic's live messages a page at a time in (timestamp, id) order."""

from __future__ import annotations

import pytest

from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.storage_plugins import Storage
from tests.storage_plugins.conformance.givens import (
    LEASE,
    NOW,
    T,
    given_messages,
    given_topic,
    lease,
    msg,
)


async def pages(storage: Storage, limit: int) -> list[list[tuple[str, int]]]:
    """Every page from the first, until a short one."""
    out: list[list[tuple[str, int]]] = []
    after = None
    while True:
        page = await storage.by_due(T, after, limit)
        out.append([(m.id, m.timestamp) for m in page])
        if len(page) < limit:
            return out
        after = (page[-1].timestamp, page[-1].id)


async def test_pages_go_by_due_time_then_id_across_buckets(storage: Storage) -> None:
    # Given messages over four buckets, three of them due at one time, one dead, one leased
    await given_topic(storage, buckets=4)
    await given_messages(
        storage,
        msg("late", NOW + 50, bucket=0),
        msg("tie-b", NOW + 20, bucket=1),
        msg("tie-c", NOW + 20, bucket=0),
        msg("tie-a", NOW + 20, bucket=3),
        msg("first", NOW - 10, bucket=2),
        msg("dead", NOW - 20, bucket=2, expires_at=1),
        msg("soon", NOW + 30, bucket=3),
    )
    await lease(storage, NOW - 10)  # "dead" dies, "first" is leased until NOW - 10 + LEASE
    # When they are read two at a time
    got = await pages(storage, 2)
    # Then they come by due time (a leased one at its lease expiry), ties by id,
    # each once, the dead left out, and a short page ends it
    assert got == [
        [("tie-a", NOW + 20), ("tie-b", NOW + 20)],
        [("tie-c", NOW + 20), ("soon", NOW + 30)],
        [("late", NOW + 50), ("first", NOW - 10 + LEASE)],
        [],
    ]
    page = await storage.by_due(T, None, 1)
    assert page[0].payload == b"tie-a" and page[0].version == 1


async def test_a_cursor_between_messages_starts_after_it(storage: Storage) -> None:
    await given_topic(storage, buckets=2)
    await given_messages(
        storage, msg("a", NOW, bucket=0), msg("c", NOW, bucket=1), msg("d", NOW + 1, bucket=0)
    )
    # A cursor naming no message (its own gone) still places the page after it
    assert [m.id for m in await storage.by_due(T, (NOW, "b"), 10)] == ["c", "d"]
    assert [m.id for m in await storage.by_due(T, (NOW + 1, "d"), 10)] == []


async def test_a_missing_topic_or_a_bad_limit_is_refused(storage: Storage) -> None:
    with pytest.raises(NotFound):
        await storage.by_due("nowhere", None, 10)
    await given_topic(storage)
    assert await storage.by_due(T, None, 10) == []
    with pytest.raises(InvalidArgument):
        await storage.by_due(T, None, 0)
