"""Storage's semantic rules, each stated once.

Backends read a message's current metadata inside their own atomic unit
(a Lua script, a transaction, the event loop) and ask these functions what
the mutation does; a returned error means "change nothing".

- Who may settle or move a message: ``check_holder`` / ``check_movable`` (the
  raw fields, for callers that hold no record, such as Redis reading a
  script's reply) and ``settle_refusal`` / ``move_refusal`` (the same over
  any record with ``owner``, ``timestamp``, ``version`` and ``dead``).
- How many deliveries a message gets: ``effective_max_deliveries``.
- What a lease pass does with a due message: ``lease_fate`` (built from
  ``dies_on_lease`` and ``at_most_once``); what a nack does: ``dies_on_nack``.
- What an insert that may replace or extend does with an id already there:
  ``on_duplicate``.

Where a Lua script or SQL statement must repeat a rule (so that it runs next
to the data), it names the function here in a comment and a test pins the two
together.
"""

from __future__ import annotations

import enum
from typing import Protocol

from dejaq.core.errors import DejaqError, Leased, NotFound, NotLeaseHolder, StaleVersion
from dejaq.core.model import InsertStatus, OnDuplicate


class Stored(Protocol):
    """What the checks read of a stored message (a backend's own record type)."""

    @property
    def owner(self) -> str | None: ...
    @property
    def timestamp(self) -> int: ...
    @property
    def version(self) -> int: ...
    @property
    def dead(self) -> bool: ...


# -- who may change a message -------------------------------------------------


def check_holder(
    id: str, exists: bool, owner_now: str | None, version_now: int, owner: str, version: int
) -> DejaqError | None:
    """May ``owner`` ack / extend / nack message ``id`` quoting ``version``?"""
    if not exists:
        return NotFound(f"message {id!r} not found")
    if owner_now != owner:
        return NotLeaseHolder(f"message {id!r} is not leased by consumer {owner!r}")
    if version_now != version:
        return StaleVersion(f"message {id!r} is at version {version_now}, not {version}")
    return None


def check_movable(
    id: str,
    exists: bool,
    owner_now: str | None,
    timestamp_now: int,
    version_now: int,
    version: int,
    now: int,
) -> DejaqError | None:
    """May a producer move or cancel message ``id`` quoting ``version``?

    An expired lease no longer protects the message, so it may be moved.
    """
    if not exists:
        return NotFound(f"message {id!r} not found")
    if version_now != version:
        return StaleVersion(f"message {id!r} is at version {version_now}, not {version}")
    if owner_now is not None and timestamp_now > now:
        return Leased(f"message {id!r} is leased by {owner_now!r} until {timestamp_now}")
    return None


def settle_refusal(id: str, stored: Stored | None, owner: str, version: int) -> DejaqError | None:
    """``check_holder`` over a stored record (None when absent; a dead one is not found)."""
    if stored is None or stored.dead:
        return check_holder(id, False, None, 0, owner, version)
    return check_holder(id, True, stored.owner, stored.version, owner, version)


def move_refusal(id: str, stored: Stored | None, version: int, now: int) -> DejaqError | None:
    """``check_movable`` over a stored record (None when absent; a dead one is not found)."""
    if stored is None or stored.dead:
        return check_movable(id, False, None, 0, 0, version, now)
    return check_movable(id, True, stored.owner, stored.timestamp, stored.version, version, now)


# -- an insert over an id already there ---------------------------------------


def on_duplicate(
    mode: OnDuplicate, live: bool, owner_now: str | None, timestamp_now: int, now: int
) -> InsertStatus:
    """What an insert in ``mode`` does with an id already taken: ``live`` when a
    live message holds it (not a dead one, not a tombstone). Only a waiting
    message changes, one not under a live lease (as ``check_movable``): one
    being delivered is LEASED, left alone; a dead message or a tombstone keeps
    the id as ``KEEP`` does (a DUPLICATE), until it is purged or forgotten."""
    if mode is OnDuplicate.KEEP or not live:
        return InsertStatus.DUPLICATE
    if owner_now is not None and timestamp_now > now:
        return InsertStatus.LEASED
    return InsertStatus.REPLACED if mode is OnDuplicate.REPLACE else InsertStatus.EXTENDED


# -- deliveries and dead letters ----------------------------------------------


def effective_max_deliveries(own: int, topic: int) -> int:
    """A message's own ``max_deliveries`` wins; 0 (unset) falls back to the topic's.
    The result 0 means unlimited."""
    return own or topic


def at_most_once(max_deliveries: int) -> bool:
    """Is a message with this (effective) limit deleted when it is delivered?"""
    return max_deliveries == 1


def dies_on_nack(deliveries: int, max_deliveries: int) -> bool:
    """Should a nacked message go to the dead timeline instead of being released?
    ``max_deliveries`` is the effective one; 0 means unlimited."""
    return max_deliveries != 0 and deliveries >= max_deliveries


def dies_on_lease(deliveries: int, max_deliveries: int, expires_at: int, now: int) -> bool:
    """Should a due message go to the dead timeline instead of being delivered?
    ``max_deliveries`` is the effective one; ``expires_at`` 0 means never."""
    if dies_on_nack(deliveries, max_deliveries):
        return True
    return expires_at != 0 and expires_at <= now


class Fate(enum.Enum):
    """What a lease pass does with one due message."""

    KILL = "kill"  # dead-lettered, not delivered
    DROP = "drop"  # delivered and deleted (at-most-once)
    KEEP = "keep"  # delivered and leased to the owner


def lease_fate(deliveries: int, own_max: int, topic_max: int, expires_at: int, now: int) -> Fate:
    """The contract's lease pass for one due message."""
    md = effective_max_deliveries(own_max, topic_max)
    if dies_on_lease(deliveries, md, expires_at, now):
        return Fate.KILL
    return Fate.DROP if at_most_once(md) else Fate.KEEP
