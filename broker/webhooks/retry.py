"""When a failed webhook request is tried again.

The endpoint's ``Retry-After`` (seconds, or an HTTP date) wins when it gives
one; otherwise the delay doubles from the topic's ``backoff_ms`` with each
delivery, jittered (``core/backoff.py``). Either is capped at ``MAX_DELAY_MS``.
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime

from dejaq.core.backoff import Backoff

MAX_DELAY_MS = 3600 * 1000


def backoff_ms(first_ms: int, deliveries: int) -> int:
    """The delay after the ``deliveries``-th attempt failed: first_ms, 2x, 4x, ...,
    each up to half again as long, at most ``MAX_DELAY_MS``."""
    first = min(max(first_ms, 1), MAX_DELAY_MS)
    return int(Backoff(first, MAX_DELAY_MS).delay(deliveries - 1))


def retry_after_ms(value: str | None, now_ms: int) -> int | None:
    """Milliseconds a ``Retry-After`` header asks to wait; None when absent or unreadable."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return min(int(text) * 1000, MAX_DELAY_MS)
    try:
        at = parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if at.tzinfo is None:
        return None
    return min(max(int(at.timestamp() * 1000) - now_ms, 0), MAX_DELAY_MS)


def delay_ms(first_ms: int, deliveries: int, retry_after: str | None, now_ms: int) -> int:
    asked = retry_after_ms(retry_after, now_ms)
    return asked if asked is not None else backoff_ms(first_ms, deliveries)
