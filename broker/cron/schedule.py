"""Cron expressions and time zones: parsing with a clear error, and occurrences.

Parsing and stepping come from ``cronsim`` (the parser behind healthchecks.io):
five fields, or six with seconds first; ``L``, ``W``, ``#`` and names;
Debian cron's daylight-saving rules:

- a time that does not exist (the hour skipped in spring) fires once, right
  after the jump (02:30 in a 02:00 -> 03:00 jump fires at 03:00);
- a time that happens twice (the hour repeated in autumn) fires once, the first
  time, for entries with a fixed hour; entries with a wildcard or stepped hour
  (``*/30 * * * *``) fire in both passes, as the clock shows both.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import cronsim

from dejaq.core.errors import InvalidArgument

_FIELDS5 = ("minute", "hour", "day-of-month", "month", "day-of-week")
_FIELDS6 = ("second", *_FIELDS5)
MAX_EXPRESSION = 200


def zone(name: str) -> ZoneInfo:
    """An IANA time zone, or a clear error."""
    try:
        if not name or name != name.strip() or ".." in name or name.startswith("/"):
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidArgument(
            f"unknown time zone {name!r} (an IANA name like Europe/Bucharest or UTC)"
        ) from None


def check(expression: str) -> str:
    """The expression if cronsim accepts it; else an error naming the field and
    its position (1-based character offset)."""
    if not expression.strip() or len(expression) > MAX_EXPRESSION:
        raise InvalidArgument(f"cron expression must be 1-{MAX_EXPRESSION} characters")
    try:
        cronsim.CronSim(expression, datetime(2000, 1, 1, tzinfo=UTC))
    except cronsim.CronSimError as exc:
        raise InvalidArgument(_located(expression, str(exc))) from None
    return expression


def _located(expression: str, reason: str) -> str:
    parts = expression.split()
    names = _FIELDS6 if len(parts) == 6 else _FIELDS5
    if len(parts) not in (5, 6):
        return (
            f"cron expression {expression!r}: {len(parts)} fields; it needs 5"
            " (minute hour day-of-month month day-of-week) or 6 (seconds first)"
        )
    field = next((n for n in names if n in reason.lower()), None)
    if field is None:
        return f"cron expression {expression!r}: {reason}"
    index = names.index(field)
    offset = _offset(expression, index)
    return (
        f"cron expression {expression!r}: {reason.rstrip('.')} in field {index + 1} ({field},"
        f" {parts[index]!r} at position {offset + 1})"
    )


def _offset(expression: str, index: int) -> int:
    """Where the ``index``-th whitespace-separated field starts."""
    pos, seen, inside = 0, -1, False
    for pos, ch in enumerate(expression):
        if not ch.isspace() and not inside:
            seen += 1
            if seen == index:
                return pos
        inside = not ch.isspace()
    return pos


def occurrences(expression: str, tz: ZoneInfo, after_ms: int) -> Iterator[int]:
    """Epoch ms of the occurrences at or after ``after_ms``, in order."""
    # cronsim yields times strictly after its start, in whole seconds.
    start = datetime.fromtimestamp((after_ms - 1) // 1000, tz)
    for at in cronsim.CronSim(expression, start):
        yield int(at.timestamp()) * 1000
