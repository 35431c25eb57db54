"""What one firing of an entry produces: a pure function of the entry, its cursor
(the next occurrence not yet produced) and the time.

Occurrences more than ``GRACE_MS`` in the past were missed (every broker was
down, or the entry was stuck): the entry's misfire policy says what becomes of
them. The others, up to ``LEAD_MS + SPAN_MS`` ahead, are produced now.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from dejaq.broker.cron.entries import LEAD_MS, SPAN_MS
from dejaq.broker.cron.schedule import occurrences, zone
from dejaq.core.cron import CronEntry, Misfire

GRACE_MS = 1_000  # an occurrence this late is still produced as usual
MAX_PER_FIRING = 1_000  # occurrences produced by one firing, at most
MAX_MISSED_COUNTED = 100_000  # past this, missed ones are skipped over uncounted


@dataclass
class Firing:
    produce: list[int] = field(default_factory=list)  # occurrence times, in order
    missed: int = 0  # occurrences missed (at least this many)
    caught_up: int = 0  # of those, produced now by the misfire policy
    next_ms: int = 0  # the next occurrence not produced; 0: the entry has ended


def plan(entry: CronEntry, cursor_ms: int, now_ms: int) -> Firing:
    out = Firing()
    tz = zone(entry.timezone)
    keep = entry.misfire_limit if entry.misfire is Misfire.ALL else 1
    missed: deque[int] = deque(maxlen=max(1, keep))
    horizon = now_ms + LEAD_MS + SPAN_MS
    if cursor_ms > now_ms:
        # The cursor comes from the entry message's due time, which is exact for a
        # firing on time but later for one re-leased after a lost lease (its due
        # time became that lease's end). Occurrences still in the future were never
        # delivered (never early), so producing them again is harmless: they are
        # refused as duplicates. Start from the next millisecond.
        cursor_ms = now_ms + 1
    times = occurrences(entry.schedule, tz, max(cursor_ms, entry.start_ms))
    while (at := next(times, None)) is not None:
        if entry.end_ms and at > entry.end_ms:
            break
        if at < now_ms - GRACE_MS:
            out.missed += 1
            missed.append(at)
            if out.missed >= MAX_MISSED_COUNTED:  # skip the rest of the gap unseen
                times = occurrences(entry.schedule, tz, now_ms - GRACE_MS)
            continue
        if at > horizon or len(out.produce) >= MAX_PER_FIRING:
            out.next_ms = at
            break
        out.produce.append(at)
    return _caught_up(entry, out, missed)


def _caught_up(entry: CronEntry, out: Firing, missed: deque[int]) -> Firing:
    if out.missed and entry.misfire is not Misfire.SKIP:
        late = list(missed)
        out.caught_up = len(late)
        out.produce = late + out.produce
    return out


def first_next(entry: CronEntry, now_ms: int) -> int:
    """An entry's first occurrence from now on (its start, if later); 0: none."""
    for at in occurrences(entry.schedule, zone(entry.timezone), max(now_ms, entry.start_ms)):
        return 0 if entry.end_ms and at > entry.end_ms else at
    return 0


def upcoming(entry: CronEntry, after_ms: int, count: int) -> list[int]:
    """The next ``count`` occurrences at or after ``after_ms`` (within start/end)."""
    out: list[int] = []
    if count <= 0 or after_ms == 0:
        return out
    for at in occurrences(entry.schedule, zone(entry.timezone), max(after_ms, entry.start_ms)):
        if (entry.end_ms and at > entry.end_ms) or len(out) >= count:
            break
        out.append(at)
    return out
