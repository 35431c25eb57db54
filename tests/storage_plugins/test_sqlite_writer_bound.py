"""The SQLite writer's queue is bounded: callers past ``max_queue`` wait."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from pathlib import Path

import pytest

from dejaq.core.errors import InvalidArgument
from dejaq.storage_plugins.sqlite.storage import parse_url
from dejaq.storage_plugins.sqlite.writer import Writer

pytestmark = pytest.mark.timeout(30)


async def test_callers_past_the_bound_wait_for_a_slot(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "w.db", isolation_level=None, check_same_thread=False)
    writer = Writer(conn, "bounded", max_queue=3)
    writer.start()
    gate = threading.Event()
    try:
        # Given a writer thread held up by its first job
        calls = [asyncio.ensure_future(writer.run(lambda c: gate.wait(10))) for _ in range(10)]
        for _ in range(5000):  # the 3 that fit are queued at once; the rest keep waiting
            await asyncio.sleep(0.001)
            if writer.queued >= 3:
                break
        await asyncio.sleep(0.05)
        # Then no more than the bound is queued, the other callers wait
        assert writer.queued == 3
        assert not any(c.done() for c in calls)
        # and once it moves on, every call completes.
        gate.set()
        assert await asyncio.gather(*calls) == [True] * 10
        assert writer.queued == 0
    finally:
        gate.set()
        await writer.close()


def test_the_bound_is_a_url_option() -> None:
    assert parse_url("sqlite:///x.db?max_queue=16").max_queue == 16
    with pytest.raises(InvalidArgument, match="max_queue"):
        parse_url("sqlite:///x.db?max_queue=0")
