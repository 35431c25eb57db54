"""A background loop stops when cancelled, even when a call inside it swallowed
the ``CancelledError`` (a storage client mid-call, ``asyncio.wait_for`` on 3.11)."""

from __future__ import annotations

import asyncio

import pytest

from dejaq.broker.observability.budget import refresh_forever

A_MINUTE_MS = 60_000


async def test_a_refresh_loop_stops_when_its_refresh_swallowed_the_cancel() -> None:
    # Given a refresh loop a minute apart whose refresh swallows a cancel
    entered = asyncio.Event()

    async def swallowing_refresh() -> None:
        entered.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            return  # what a client that swallows the cancel does

    task = asyncio.create_task(refresh_forever("test", swallowing_refresh, A_MINUTE_MS))
    await entered.wait()

    # When it is cancelled mid-refresh
    task.cancel()

    # Then it ends cancelled at once, not a minute later
    done, _ = await asyncio.wait({task}, timeout=5)
    assert task in done
    with pytest.raises(asyncio.CancelledError):
        task.result()
