"""Where the broker puts a priority topic's messages (core/priority.py).

One rule for produce, move and the dispatch metrics: a message whose
not-before time has come is stored at its rank at once; one still to come
waits at that time (a timestamp >= 0) until ``Storage.promote`` ranks it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dejaq.core import priority
from dejaq.core.model import KIND_PRIORITY, Topic
from dejaq.core.wire.batches import shown_timestamps


def is_priority(topic: Topic) -> bool:
    return topic.settings.kind == KIND_PRIORITY


def stored_at(topic: Topic, prio: int, not_before: int, now: int) -> int:
    """The timestamp a message of ``prio`` not before ``not_before`` is stored at."""
    if not_before > now:
        return not_before
    return priority.rank(topic, prio, now)


def waited_ms(
    topic: Topic, now: int, stamps: npt.NDArray[np.int64], prios: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """How long each delivery of a pass at ``now`` waited since it was available
    (a stored timestamp: a rank, or a due time not yet promoted); never negative."""
    return np.maximum(now - shown_timestamps(topic, stamps, prios), 0)
