"""The checks every backend applies before a mutation, in one place.

Backends read a message's current metadata inside their own atomic unit
(a Lua script, a transaction, the event loop) and ask these functions whether
the mutation may proceed; a returned error means "change nothing".
"""

from __future__ import annotations

from dejaq.core.errors import DejaqError, Leased, NotFound, NotLeaseHolder, StaleVersion


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


def dies_on_lease(deliveries: int, max_deliveries: int, expires_at: int, now: int) -> bool:
    """Should a due message go to the dead timeline instead of being delivered?"""
    if max_deliveries and deliveries >= max_deliveries:
        return True
    return bool(expires_at) and expires_at <= now
