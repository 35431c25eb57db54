"""A cron entry: a schedule that produces ordinary messages on a topic.

Each occurrence becomes a message with the id ``ENTRY@EPOCH_MS`` (the entry id
and the occurrence time), due at that millisecond: on a timeline its due time,
on a priority topic its not-before time, with the entry's priority. The broker
produces occurrences a little ahead of time (``LEAD_MS``); an entry changed,
paused or deleted keeps the occurrences already produced.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

# A topic's entries live on its companion topic ``TOPIC~cron`` (``~`` is not
# allowed in topic names, so users can neither create nor address it).
COMPANION_SUFFIX = "~cron"


class Misfire(enum.Enum):
    """What to do with occurrences missed while every broker was down."""

    SKIP = "skip"  # drop them; go on from the next one
    ONCE = "once"  # produce the latest missed one, now
    ALL = "all"  # produce the latest ``misfire_limit`` of them, now


@dataclass(frozen=True, slots=True)
class CronEntry:
    topic: str
    id: str
    schedule: str  # 5 fields (minute resolution) or 6 (seconds first)
    timezone: str = "UTC"  # an IANA name
    payload: bytes = b""
    start_ms: int = 0  # no occurrence before this (0: from when it is added)
    end_ms: int = 0  # no occurrence after this (0: never ends)
    paused: bool = False
    misfire: Misfire = Misfire.ONCE
    misfire_limit: int = 100  # for Misfire.ALL
    priority: int = 0  # of every occurrence, on a priority topic (0 on a timeline)
    version: int = 0  # changes with every update (and every firing); quote it to update
    next_ms: int = 0  # the next occurrence not yet produced; 0 when paused or ended


def occurrence_id(entry_id: str, at_ms: int) -> str:
    """The id of an entry's occurrence at ``at_ms``: the same on every broker."""
    return f"{entry_id}@{at_ms}"


def companion(topic: str) -> str:
    """The name of the cron timeline holding ``topic``'s entries."""
    return topic + COMPANION_SUFFIX


def target_of(companion_name: str) -> str | None:
    """The topic a cron timeline serves; None for an ordinary topic."""
    if companion_name.endswith(COMPANION_SUFFIX):
        return companion_name.removesuffix(COMPANION_SUFFIX)
    return None
