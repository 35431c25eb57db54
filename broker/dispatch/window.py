"""The look-ahead window: messages leased a few ms before they are due, held in
the broker until their millisecond comes.

A lease pass that looks ahead (``LeaseRequest.horizon_ms``) returns messages
due now and messages due within the horizon. The ones due now go out at once;
the others wait here, already leased to the consumer they will go to, and leave
in one frame per consumer as their millisecond arrives. Nothing leaves before
its timestamp by the broker's clock, the same clock that judges "due" in a lease
pass, so never-early holds as it did without the window.

A consumer that holds deliveries until due itself (``ahead``: its
``Hello.hold_ms``, as the driver's ``Consumer`` does) is sent them ``ahead`` ms
before their timestamp: the broker's own stalls then make none late, and the
consumer, which releases each by the broker's clock, never early.

A held message is leased, so storage will not give it to anyone else, and a
move or cancel of it is refused as under a lease, as for one already delivered.
If its consumer leaves (a Goodbye or a broken stream), the dispatcher hands its
held messages back to storage (``Storage.hand_back``): due at their own time
again, the delivery that never happened uncounted.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Generic, TypeVar

from dejaq.core.deliveries import Deliveries, columns
from dejaq.core.model import LeasedMessage, Leases

R = TypeVar("R")  # a consumer session: hashed by identity


class _Held:
    """One lease pass's messages for one consumer, in due order, not yet sent."""

    __slots__ = ("dues", "messages", "sent", "until")

    def __init__(self, messages: Deliveries, until: int) -> None:
        self.messages = messages
        self.dues = messages.timestamps
        self.until = until
        self.sent = 0  # messages[:sent] have gone out

    def take(self, now: int) -> Deliveries | None:
        """The held messages due by ``now`` (None: none is)."""
        end = bisect_right(self.dues, now, self.sent)
        if end == self.sent:
            return None
        out = (
            self.messages
            if self.sent == 0 and end == len(self.dues)
            else self.messages[self.sent : end]
        )
        self.sent = end
        return out

    @property
    def next_due(self) -> int | None:
        return self.dues[self.sent] if self.sent < len(self.dues) else None


class Window(Generic[R]):
    """Held messages by receiver (a consumer session); ``ahead(receiver)``: how
    many ms before its timestamp a message may go to that receiver (0 by default).
    Messages are held and leave as columns (``core/deliveries.py``)."""

    def __init__(self, ahead: Callable[[R], int] | None = None) -> None:
        self._held: dict[R, list[_Held]] = {}
        self._ahead = ahead or (lambda _: 0)

    def hold(self, receiver: R, leases: Leases) -> None:
        """Hold a pass's deliveries for ``receiver`` until each is due (``due``)."""
        if not leases.delivered:
            return
        messages = columns(leases.delivered).in_due_order()
        self._held.setdefault(receiver, []).append(_Held(messages, leases.lease_until))

    def due(self, now: int) -> list[tuple[R, Leases]]:
        """Take the held messages due by ``now`` (plus the receiver's ``ahead``): one
        ``Leases`` per receiver, in due order across the passes that took them, with
        the earliest of their lease ends."""
        out: list[tuple[R, Leases]] = []
        for receiver, batches in list(self._held.items()):
            by = now + self._ahead(receiver)
            parts: list[Deliveries] = []
            until = 0
            for held in batches:
                part = held.take(by)
                if part is not None:
                    until = held.until if not parts else min(until, held.until)
                    parts.append(part)
            if parts:
                messages = Deliveries.joined(parts)
                if len(parts) > 1:
                    messages = messages.in_due_order()
                out.append((receiver, Leases(messages, until)))
            left = [h for h in batches if h.next_due is not None]
            if left:
                self._held[receiver] = left
            else:
                del self._held[receiver]
        return out

    def next_due(self) -> int | None:
        """When the next held message may leave (its timestamp less its receiver's
        ``ahead``), or None."""
        dues = [
            h.next_due - self._ahead(r)
            for r, hs in self._held.items()
            for h in hs
            if h.next_due is not None
        ]
        return min(dues, default=None)

    def receivers(self) -> list[R]:
        """The receivers something is held for."""
        return list(self._held)

    def forget(self, receiver: R) -> list[LeasedMessage]:
        """Take a leaving receiver's held messages out: they are still leased to it."""
        return [m for h in self._held.pop(receiver, []) for m in h.messages[h.sent :]]
