"""Priority topics: where a message of a given priority sits on its topic's timeline.

A priority topic keeps its messages on the same time-ordered index as a
timeline, so every backend serves it with the index it already has. A message
that is *available* (its not-before time has come, it is not under a live
lease) sits at its **rank**, a negative timestamp: always due, and ordered by
priority first (0 is the most urgent), then by the time it became available::

    rank = priority * step + (available_at - created_at_ms) - RANK_BASE

``step`` is the topic's aging step (``aging_ms``): a message that has waited
``step`` ms ranks level with one a priority more urgent made available now,
so low priorities are never starved for ever. Without aging the step is
``NO_AGING_STEP`` (about 400 days), which in practice never ages.

A message not yet available (a future not-before time, a nack delay, a lease
that runs) keeps an ordinary timestamp ``>= 0``; once it is due, the broker's
``promote`` moves it to its rank. Ranks stay above ``-RANK_BASE`` and below
zero, within 14 decimal digits, so a double (a Redis score) holds them exactly.
"""

from __future__ import annotations

from dejaq.core.bounds import Bound
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import KIND_PRIORITY, Topic

RANK_BASE = 1 << 46
NO_AGING_STEP = 1 << 35
MAX_PRIORITIES = 1000
DEFAULT_PRIORITIES = 100


def step(topic: Topic) -> int:
    """The aging step of a priority topic, in ms."""
    return topic.settings.aging_ms or NO_AGING_STEP


def rank(topic: Topic, priority: int, available_at: int) -> int:
    """Where a message of ``priority`` available since ``available_at`` sits."""
    return priority * step(topic) + (available_at - topic.created_at_ms) - RANK_BASE


def available_at(topic: Topic, priority: int, ranked: int) -> int:
    """The inverse of ``rank``: when a ranked message became available."""
    return ranked + RANK_BASE - priority * step(topic) + topic.created_at_ms


def is_ranked(timestamp: int) -> bool:
    """True for a rank (an available message of a priority topic)."""
    return timestamp < 0


def priority_bound(topic: Topic) -> Bound:
    """The priorities ``topic`` takes: 0 (most urgent) .. its last on a priority
    topic, only 0 (none given) on a timeline."""
    name = repr(topic.name).replace("{", "{{").replace("}", "}}")  # a format string
    if topic.settings.kind != KIND_PRIORITY:
        return Bound(0, 0, f"topic {name} is a timeline: it takes no priority")
    return Bound(
        0,
        topic.settings.priorities - 1,
        f"priority {{value}} is out of range for topic {name}: 0 (most urgent) .. {{high}}",
    )


def check_priority(topic: Topic, priority: int) -> int:
    """``priority`` if the topic takes it, else InvalidArgument."""
    err = priority_bound(topic).error(priority)
    if err is not None:
        raise InvalidArgument(err)
    return priority
