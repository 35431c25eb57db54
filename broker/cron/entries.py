"""Where cron entries live: each one is a message on its topic's cron timeline.

A topic's entries are kept on a companion topic, ``TOPIC~cron`` (``~`` is not
allowed in topic names, so users can neither create nor address it). An entry
is a message there whose id is the entry id, whose payload is the entry's
definition (JSON), and whose timestamp is when its next occurrence must be
produced: ``LEAD_MS`` before it is due. A paused or ended entry is parked at
the end of time. So every backend keeps entries durably, and leases decide
which broker fires an entry: one at a time across the cluster, another one
after a broker dies, as for any message.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from dejaq.core import cron as core_cron
from dejaq.core.cron import CronEntry, Misfire
from dejaq.core.errors import StorageError
from dejaq.core.model import MAX_TIMESTAMP, Message, Topic, TopicSettings

LEAD_MS = 10_000  # an occurrence is produced this long before it is due
SPAN_MS = 5_000  # a firing also produces what falls due within this much more
FIRING_LEASE_MS = 5_000  # a broker that dies while firing is replaced after this
PARKED = MAX_TIMESTAMP  # where paused and ended entries wait
# No dedup window: an entry's id is its name, free again once it is deleted.
SETTINGS = TopicSettings(buckets=16, lease_ms=FIRING_LEASE_MS, dedup_window_ms=0)


# The companion's name is a rule of the model (core/cron.py): the gauges read it too.
companion = core_cron.companion
target_of = core_cron.target_of


def users_topics(topics: Iterable[Topic]) -> list[Topic]:
    """The topics users made: every listing leaves out the cron timelines kept beside them."""
    return [t for t in topics if target_of(t.name) is None]


def fire_at(next_ms: int) -> int:
    """When the entry's message must be leased to produce ``next_ms`` in time."""
    return PARKED if next_ms == 0 else max(0, next_ms - LEAD_MS)


def encode(entry: CronEntry) -> bytes:
    """The definition, as the entry message's payload (not its version or cursor)."""
    return json.dumps(
        {
            "schedule": entry.schedule,
            "timezone": entry.timezone,
            "payload": base64.b64encode(entry.payload).decode(),
            "start_ms": entry.start_ms,
            "end_ms": entry.end_ms,
            "paused": entry.paused,
            "misfire": entry.misfire.value,
            "misfire_limit": entry.misfire_limit,
            "priority": entry.priority,
        },
        separators=(",", ":"),
    ).encode()


def decode(topic: str, id: str, payload: bytes) -> CronEntry:
    """An entry from its payload; one written before entries had a priority has 0."""
    try:
        d: dict[str, Any] = json.loads(payload)
        return CronEntry(
            topic,
            id,
            d["schedule"],
            d["timezone"],
            base64.b64decode(d["payload"]),
            d["start_ms"],
            d["end_ms"],
            d["paused"],
            Misfire(d["misfire"]),
            d["misfire_limit"],
            d.get("priority", 0),
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise StorageError(f"cron entry {id!r} of {topic!r} is unreadable: {exc}") from exc


def from_message(topic: str, message: Message) -> CronEntry:
    """The entry a cron-timeline message holds, with its version and next occurrence."""
    entry = decode(topic, message.id, message.payload)
    next_ms = 0 if message.timestamp >= PARKED else message.timestamp + LEAD_MS
    return replace(entry, version=message.version, next_ms=next_ms)
