"""What the in-process broker stories share: the clock they inject."""

from __future__ import annotations

import pytest

from tests.broker.inprocess import ManualClock


@pytest.fixture
async def clock() -> ManualClock:
    """A clock that moves only when the story moves it."""
    return ManualClock()
