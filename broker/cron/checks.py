"""Input checks for cron entries, at the broker's edge."""

from __future__ import annotations

import re

from dejaq.broker.cron.schedule import check, zone
from dejaq.core.cron import CronEntry
from dejaq.core.due_time import DUE_TIME
from dejaq.core.errors import InvalidArgument, PayloadTooLarge
from dejaq.core.model import Topic
from dejaq.core.priority import check_priority

ENTRY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,199}")  # no '@': it splits occurrence ids
MAX_MISFIRE_LIMIT = 10_000


def entry_id(id: str) -> str:
    if not ENTRY_ID.fullmatch(id):
        raise InvalidArgument(
            f"cron entry id {id!r} must be 1-200 characters of letters, digits or ._:-"
        )
    return id


def entry(e: CronEntry, topic: Topic) -> CronEntry:
    """The entry if every field is in range; else a clear error. Its priority
    is checked as a produced message's is: within a priority topic's range, 0
    on a timeline."""
    entry_id(e.id)
    check_priority(topic, e.priority)
    check(e.schedule)
    zone(e.timezone)
    for name, ms in (("start", e.start_ms), ("end", e.end_ms)):
        if err := DUE_TIME.error(ms):  # 0: none; epoch seconds refused as such
            raise InvalidArgument(f"cron {name}: {err}")
    if e.end_ms and e.end_ms <= e.start_ms:
        raise InvalidArgument("a cron entry's end must come after its start")
    if not 1 <= e.misfire_limit <= MAX_MISFIRE_LIMIT:
        raise InvalidArgument(f"misfire limit must be between 1 and {MAX_MISFIRE_LIMIT}")
    if len(e.payload) > topic.settings.max_payload_bytes:
        raise PayloadTooLarge(
            f"payload of {len(e.payload)} bytes is over the topic's maximum"
            f" ({topic.settings.max_payload_bytes})"
        )
    return e
