"""A memory scan names and sorts a bucket's ids once, not once a page: reading
a bucket costs its size, not its size times its pages."""

from __future__ import annotations

import pytest

from dejaq.core.model import NewMessage, Topic, TopicSettings
from dejaq.storage_plugins.memory.columns import Columns
from dejaq.storage_plugins.memory.scan import scan
from dejaq.storage_plugins.memory.timeline import Timeline
from dejaq.storage_plugins.memory.types import I64

NOW = 1_000_000


def timeline(count: int, buckets: int = 4) -> Timeline:
    tl = Timeline(Topic("t", TopicSettings(buckets=buckets), created_at_ms=7))
    tl.insert([NewMessage(f"m{i:05d}", NOW + i, b"p", i % buckets) for i in range(count)])
    return tl


def named_while(tl: Timeline, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the ids named from the columns (each slot's bytes decoded)."""
    named = [0]
    records = Columns.records

    def counting(cols: Columns, slots: I64) -> tuple[list[str], list[bytes]]:
        named[0] += len(slots)
        return records(cols, slots)

    monkeypatch.setattr(Columns, "records", counting)
    return named


def read_bucket(tl: Timeline, bucket: int, limit: int) -> tuple[list[str], int]:
    ids: list[str] = []
    after: str | None = ""
    pages = 0
    while after is not None:
        page = scan(tl, bucket, after, limit)
        ids += [m.id for m in page.messages]
        after = page.after_id
        pages += 1
    return ids, pages


def test_a_bucket_read_in_many_pages_is_named_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a bucket of 1,000 messages
    tl = timeline(4_000)
    named = named_while(tl, monkeypatch)
    # when it is read 10 at a time
    ids, pages = read_bucket(tl, 1, 10)
    # then every message comes once, in order, and each was named twice: once
    # when the bucket's ids were sorted, once on its page (and the one after
    # each page's end, which tells there is more), not once for every page
    assert ids == [f"m{i:05d}" for i in range(1, 4_000, 4)]
    assert pages == 100
    assert named[0] == 1_000 + 1_000 + 99


def test_an_insert_into_the_bucket_is_seen_by_the_next_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a bucket read up to its 10th message
    tl = timeline(400)
    first = scan(tl, 1, "", 10)
    named = named_while(tl, monkeypatch)
    # when a message enters another bucket, the next page names its own 10
    # (and the 11th, which tells there is more) only
    tl.insert([NewMessage("m00002x", NOW, b"p", 2)])
    scan(tl, 1, first.after_id or "", 10)
    assert named[0] == 11
    # and when one enters this bucket after the cursor, the next page reads it
    tl.insert([NewMessage("m00037x", NOW, b"p", 1)])
    page = scan(tl, 1, first.after_id or "", 3)
    assert first.after_id == "m00037"
    assert [m.id for m in page.messages] == ["m00037x", "m00041", "m00045"]
