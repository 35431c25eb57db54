"""Input checks at the broker's edge: every request is validated before storage sees it."""

from __future__ import annotations

import re

from dejaq.core import due_time, key_limits, priority
from dejaq.core.bounds import Bound
from dejaq.core.due_time import DUE_TIME
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import (
    KIND_PRIORITY,
    KIND_TIMELINE,
    KINDS,
    MAX_BUCKETS,
    MAX_PAYLOAD_LIMIT,
    MAX_TIMESTAMP,
    TopicSettings,
)
from dejaq.core.wire.frames import MAX_FRAME_BYTES, frame_bytes

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
CONSUMER_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,199}")
MAX_ID_BYTES = 256
# What a message carries, each bound stated once (produce checks whole columns by them).
# From 2001-09-09, or 0: an earlier time can only be seconds.
TIMESTAMP = DUE_TIME
EXPIRY = due_time.EXPIRY  # 0: none
MESSAGE_ID_BYTES = Bound(0, MAX_ID_BYTES, "message id is longer than {high} bytes")
MIN_LEASE_MS = 10
MAX_LEASE_MS = 7 * 24 * 3600 * 1000
MAX_CREDITS = 1_000_000
MIN_RATE = 0.001  # one delivery in 1,000 s
MAX_RATE = 10_000_000.0


def topic_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise InvalidArgument(
            f"topic name {name!r} must be 1-200 characters of letters, digits, '.', '_' or '-',"
            " starting with a letter or digit"
        )
    return name


def consumer_id(cid: str) -> str:
    if not CONSUMER_ID.fullmatch(cid):
        raise InvalidArgument(
            f"consumer id {cid!r} must be 1-200 characters of letters, digits or ._:@-"
        )
    return cid


def settings(s: TopicSettings, max_frame_bytes: int = MAX_FRAME_BYTES) -> TopicSettings:
    """Check a topic's settings; its largest message must fit a frame of
    ``max_frame_bytes`` (the broker's produce frame cap) with its metadata."""
    if not 1 <= s.buckets <= MAX_BUCKETS:
        raise InvalidArgument(f"buckets must be between 1 and {MAX_BUCKETS}, not {s.buckets}")
    lease_ms(s.lease_ms)
    limit = max_payload_limit(max_frame_bytes)
    if not 1 <= s.max_payload_bytes <= limit:
        raise InvalidArgument(
            f"max payload must be between 1 and {limit} bytes"
            + ("" if limit == MAX_PAYLOAD_LIMIT else " (what one frame carries with its metadata)")
        )
    if s.max_deliveries < 0:
        raise InvalidArgument("max deliveries cannot be negative")
    for name, ms in (
        ("dead retention", s.dead_retention_ms),
        ("expiry", s.expiry_ms),
        ("dedup window", s.dedup_window_ms),
    ):
        if not 0 <= ms <= MAX_TIMESTAMP:
            raise InvalidArgument(f"{name} must be between 0 and {MAX_TIMESTAMP} ms, not {ms}")
    if s.max_rate != 0:  # 0: no cap
        max_rate(s.max_rate)
    key_limits.concurrency(s.key_concurrency)
    key_limits.rate(s.key_rate)
    key_limits.burst(s.key_burst)
    if (s.key_concurrency or s.key_rate) and s.kind != KIND_TIMELINE:
        raise InvalidArgument("limits per key are settings of timelines, not of a priority topic")
    kind_settings(s)
    return s


def kind_settings(s: TopicSettings) -> None:
    """The kind of a topic and what only a priority topic may set."""
    if s.kind not in KINDS:
        raise InvalidArgument(f"unknown topic kind {s.kind!r}: expected one of {', '.join(KINDS)}")
    if s.kind != KIND_PRIORITY:
        if s.priorities or s.aging_ms:
            raise InvalidArgument(
                f"priorities and aging are settings of priority topics, not of a {s.kind}"
            )
        return
    if not 1 <= s.priorities <= priority.MAX_PRIORITIES:
        raise InvalidArgument(
            f"priorities must be between 1 and {priority.MAX_PRIORITIES}, not {s.priorities}"
        )
    if not 0 <= s.aging_ms <= priority.NO_AGING_STEP:
        raise InvalidArgument(
            f"aging must be between 0 (none) and {priority.NO_AGING_STEP} ms, not {s.aging_ms}"
        )


def max_rate(rate: float) -> float:
    """A delivery cap in messages a second: positive, finite, at most ``MAX_RATE``."""
    if not MIN_RATE <= rate <= MAX_RATE:
        raise InvalidArgument(
            f"max rate must be between {MIN_RATE:g} and {MAX_RATE:,.0f} deliveries a second,"
            f" not {rate:g}"
        )
    return rate


def lease_ms(ms: int) -> int:
    if not MIN_LEASE_MS <= ms <= MAX_LEASE_MS:
        raise InvalidArgument(f"lease must be between {MIN_LEASE_MS} ms and 7 days, not {ms} ms")
    return ms


def delay_ms(ms: int) -> int:
    if not 0 <= ms <= MAX_TIMESTAMP:
        raise InvalidArgument(f"delay {ms} ms is out of range")
    return ms


def timestamp_error(ts: int) -> str | None:
    return TIMESTAMP.error(ts)


def timestamp(ts: int) -> int:
    err = timestamp_error(ts)
    if err:
        raise InvalidArgument(err)
    return ts


def message_id_error(mid: str) -> str | None:
    if "\x00" in mid:
        return "message id contains a NUL character"
    return MESSAGE_ID_BYTES.error(len(mid.encode()))


def message_ids_valid(ids: list[str]) -> bool:
    """Whether ``message_id_error`` finds nothing in any of ``ids``, checked at
    C speed: UTF-8 takes at most 4 bytes a character, so most batches need no
    encoding to know."""
    if not ids:
        return True
    if "\x00" in "".join(ids):
        return False
    if max(map(len, ids)) * 4 <= MESSAGE_ID_BYTES.high:
        return True
    return MESSAGE_ID_BYTES.holds_for_all([len(i.encode()) for i in ids])


def payload_bound(s: TopicSettings) -> Bound:
    """The payload sizes a topic takes."""
    return Bound(0, s.max_payload_bytes, "payload of {value} bytes is over the topic's {high}")


def message_id(mid: str) -> str:
    if not mid:
        raise InvalidArgument("message id is empty")
    err = message_id_error(mid)
    if err:
        raise InvalidArgument(err)
    return mid


def credits(n: int) -> int:
    if not 1 <= n <= MAX_CREDITS:
        raise InvalidArgument(f"credits must be between 1 and {MAX_CREDITS}, not {n}")
    return n


def max_payload_limit(max_frame_bytes: int) -> int:
    """The largest max payload a topic may have: one message of it, with its
    metadata, fits a frame of ``max_frame_bytes``."""
    return min(MAX_PAYLOAD_LIMIT, max_frame_bytes - frame_bytes(1, 0))
