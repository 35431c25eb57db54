"""When a message expires under its topic's ``expiry_ms``."""

from __future__ import annotations

from dejaq.core.model import MAX_TIMESTAMP, TopicSettings


def topic_expiry(s: TopicSettings, available_at: int) -> int:
    """A message's expiry under its topic's ``expiry_ms``, counted from when it
    is available (a timeline's due time; a priority message's not-before time,
    or its produce when that has passed); 0 = none."""
    if not s.expiry_ms:
        return 0
    return min(available_at + s.expiry_ms, MAX_TIMESTAMP)
