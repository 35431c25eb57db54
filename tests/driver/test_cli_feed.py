"""The CLI's feed: items read in a thread, taken on the loop in batches."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from dejaq.driver.cli.feed import Feed
from tests.e2e.support import wait_until


async def test_an_item_that_comes_alone_is_handed_over_without_waiting_for_more() -> None:
    # given a source that gives one item, then nothing until told
    more = threading.Event()

    def source() -> Iterator[int]:
        yield 1
        more.wait(10)
        yield 2

    feed = Feed(source(), lambda _: 1, lines=1000, budget=1 << 20)
    # when a batch is asked for, then the lone item comes at once
    assert await asyncio.wait_for(feed.batch(), 2) == [1]
    # and the next waits for its item, then the input's end
    waiting = asyncio.ensure_future(feed.batch())
    await asyncio.sleep(0.05)
    assert not waiting.done()
    more.set()
    assert await asyncio.wait_for(waiting, 2) == [2]
    assert await asyncio.wait_for(feed.batch(), 2) is None


async def test_batches_keep_the_order_within_their_lines_and_bytes() -> None:
    # given 300 items of 10 bytes and one of 500
    sizes = [10] * 150 + [500] + [10] * 150
    feed = Feed(iter(enumerate(sizes)), lambda item: item[1], lines=40, budget=200)
    # when they are taken
    batches = []
    while (batch := await asyncio.wait_for(feed.batch(), 2)) is not None:
        batches.append(batch)
    # then each, in order, has at most 40 items and 200 bytes, save the big one alone
    assert [item for batch in batches for item in batch] == list(enumerate(sizes))
    assert all(len(batch) <= 40 for batch in batches)
    for batch in batches:
        total = sum(size for _, size in batch)
        assert total <= 200 or batch == [(150, 500)], batch


async def test_the_thread_reads_no_more_than_twice_a_batch_ahead() -> None:
    # given a source of 10,000 items that counts what is read of it
    read = 0

    def source() -> Iterator[int]:
        nonlocal read
        for i in range(10_000):
            read += 1
            yield i

    feed = Feed(source(), lambda _: 1, lines=100, budget=1 << 20)
    # when nothing is taken for a while
    await wait_until(lambda: read >= 201, 2, "the thread to read ahead")
    await asyncio.sleep(0.1)
    # then the thread holds at two batches (and the item it waits to add)
    assert read == 201
    # and taking one lets it read one more batch
    assert len(await feed.batch() or []) == 100
    await wait_until(lambda: read >= 301, 2, "the thread to read on")
    await asyncio.sleep(0.1)
    assert read == 301
    feed.close()


async def test_a_failing_read_is_raised_after_the_items_before_it() -> None:
    # given a source that fails after two items
    def source() -> Iterator[int]:
        yield 1
        yield 2
        raise OSError(5, "Input/output error")

    feed = Feed(source(), lambda _: 1, lines=1000, budget=1 << 20)
    taken: list[int] = []
    # when it is read, then the two come, and the failure after them
    with pytest.raises(OSError, match="Input/output error"):
        while (batch := await asyncio.wait_for(feed.batch(), 2)) is not None:
            taken += batch
    assert taken == [1, 2]
