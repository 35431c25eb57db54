"""The bytes a broker holds for its consumers, bounded broker-wide.

Each consumer's outbox (outbox.py) is bounded by frames, and its deliveries by
its credits (up to 1,000,000): alone, a few consumers that stop reading could
still make the broker hold gigabytes of delivery frames they never take. Every
outbox reports the bytes of the delivery frames waiting in it here (with the
messages they carry, kept to hand back); past
``limit`` (``--max-held-bytes``) the consumer holding the most is cut off
(RESOURCE_EXHAUSTED), then the next, until the total is under the bound again.
A cut-off consumer's unsent deliveries go back to the timeline as with the
outbox's own bound; those whose lease runs out first are redelivered when it
does: nothing is lost.
"""

from __future__ import annotations

from typing import Protocol

from dejaq.core.errors import ResourceExhausted


class Holder(Protocol):
    """A consumer's outbox, as the ledger sees it."""

    @property
    def consumer(self) -> str: ...

    @property
    def held_bytes(self) -> int: ...

    def cut_off(self, reason: ResourceExhausted) -> None: ...


class HeldBytes:
    """The ledger: delivery bytes waiting in every consumer's outbox."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._holders: set[Holder] = set()

    def add(self, holder: Holder, size: int) -> None:
        """``holder`` now holds ``size`` more bytes; past the bound, cut off the
        greediest holders until the rest fit."""
        self._holders.add(holder)
        self.total += size
        while self.total > self.limit and self._holders:
            greediest = max(self._holders, key=lambda h: h.held_bytes)
            held = greediest.held_bytes
            self.leave(greediest)
            greediest.cut_off(
                ResourceExhausted(
                    f"consumer {greediest.consumer!r} is not reading its stream fast enough:"
                    f" {held} bytes of deliveries wait for it, and the broker holds over"
                    f" {self.limit} for its consumers (--max-held-bytes)"
                )
            )

    def release(self, holder: Holder, size: int) -> None:
        """``holder`` sent or gave back ``size`` bytes."""
        if holder in self._holders:
            self.total -= size

    def leave(self, holder: Holder) -> None:
        """``holder`` is cut off or gone: what it still holds is no longer counted."""
        if holder in self._holders:
            self._holders.discard(holder)
            self.total -= holder.held_bytes
