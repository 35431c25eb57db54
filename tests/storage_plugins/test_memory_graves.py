"""Graves: tombstone slots oldest first, grown and compacted in place."""

from __future__ import annotations

import numpy as np

from dejaq.storage_plugins.memory.graves import Graves


def test_slots_leave_in_the_order_they_came() -> None:
    graves = Graves()
    for start in range(0, 1_000, 100):  # grows past its first capacity
        graves.push(np.arange(start, start + 100, dtype=np.int64))
    assert len(graves) == 1_000
    assert graves.peek(3).tolist() == [0, 1, 2]
    graves.pop(250)
    assert graves.peek(2).tolist() == [250, 251]
    graves.push(np.array([7], np.int64))  # compacts when it must grow
    graves.pop(750)
    assert graves.peek(5).tolist() == [7]
    graves.pop(5)
    assert len(graves) == 0 and graves.peek(1).tolist() == []
