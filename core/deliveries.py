"""A lease pass's deliveries as columns: one list per field, no object per message.

The memory backend leases a pass as columns read straight from its own
columns; the dispatcher's window slices them by due time and the delivery
frame's encoder writes them as they are (``core/wire/batches.py``). At tens
of thousands of deliveries a second a tuple per message, built by storage
and taken apart again by the encoder, was a fair share of the broker's CPU
and most of its garbage-collector passes.

``Deliveries`` is still a ``Sequence[LeasedMessage]``: whoever wants one
object per message (a webhook post, an HTTP answer, a key's limits, the
backends that lease row by row) indexes or iterates it, and each
``LeasedMessage`` is made then. ``columns`` gives any such sequence as
columns, as it is when it is one already.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import pairwise, repeat
from typing import overload

from dejaq.core.model import LeasedMessage


class Deliveries(Sequence[LeasedMessage]):
    """Deliveries by column, in one order. ``priorities`` None: every one 0;
    ``keys`` / ``headers`` None: none has one (else "" / b"" where one has none)."""

    __slots__ = (
        "deliveries",
        "headers",
        "ids",
        "keys",
        "payloads",
        "priorities",
        "timestamps",
        "versions",
    )

    def __init__(
        self,
        ids: list[str],
        timestamps: list[int],
        payloads: list[bytes],
        versions: list[int],
        deliveries: list[int],
        priorities: list[int] | None = None,
        keys: list[str] | None = None,
        headers: list[bytes] | None = None,
    ) -> None:
        self.ids = ids
        self.timestamps = timestamps  # due time before the lease (a rank on a priority topic)
        self.payloads = payloads
        self.versions = versions
        self.deliveries = deliveries
        self.priorities = priorities
        self.keys = keys
        self.headers = headers

    @classmethod
    def of(cls, messages: Sequence[LeasedMessage]) -> Deliveries:
        """``messages`` turned into columns (one pass per field)."""
        if not messages:
            return cls([], [], [], [], [])
        return cls(
            [m.id for m in messages],
            [m.timestamp for m in messages],
            [m.payload for m in messages],
            [m.version for m in messages],
            [m.deliveries for m in messages],
            [m.priority for m in messages],
            [m.key for m in messages],
            [m.headers for m in messages],
        )

    @classmethod
    def joined(cls, parts: Sequence[Deliveries]) -> Deliveries:
        """``parts`` one after the other."""
        if len(parts) == 1:
            return parts[0]
        out = cls([], [], [], [], [], [], None, None)
        priorities: list[int] = []
        keys: list[str] | None = None
        headers: list[bytes] | None = None
        for p in parts:
            n = len(out.ids)
            out.ids += p.ids
            out.timestamps += p.timestamps
            out.payloads += p.payloads
            out.versions += p.versions
            out.deliveries += p.deliveries
            priorities += p.priorities if p.priorities is not None else [0] * len(p.ids)
            if p.keys is not None or keys is not None:
                keys = (keys if keys is not None else [""] * n) + (
                    p.keys if p.keys is not None else [""] * len(p.ids)
                )
            if p.headers is not None or headers is not None:
                headers = (headers if headers is not None else [b""] * n) + (
                    p.headers if p.headers is not None else [b""] * len(p.ids)
                )
        out.priorities, out.keys, out.headers = priorities, keys, headers
        return out

    def in_due_order(self) -> Deliveries:
        """These deliveries by due time (equal times in their order): itself
        when they are already."""
        ts = self.timestamps
        if all(a <= b for a, b in pairwise(ts)):
            return self
        return self.picked(sorted(range(len(ts)), key=ts.__getitem__))

    def picked(self, at: list[int]) -> Deliveries:
        """The deliveries at positions ``at``, in that order."""
        return Deliveries(
            [self.ids[i] for i in at],
            [self.timestamps[i] for i in at],
            [self.payloads[i] for i in at],
            [self.versions[i] for i in at],
            [self.deliveries[i] for i in at],
            None if self.priorities is None else [self.priorities[i] for i in at],
            None if self.keys is None else [self.keys[i] for i in at],
            None if self.headers is None else [self.headers[i] for i in at],
        )

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, at: int) -> LeasedMessage: ...

    @overload
    def __getitem__(self, at: slice) -> Deliveries: ...

    def __getitem__(self, at: int | slice) -> LeasedMessage | Deliveries:
        if isinstance(at, slice):
            return Deliveries(
                self.ids[at],
                self.timestamps[at],
                self.payloads[at],
                self.versions[at],
                self.deliveries[at],
                None if self.priorities is None else self.priorities[at],
                None if self.keys is None else self.keys[at],
                None if self.headers is None else self.headers[at],
            )
        return LeasedMessage(
            self.ids[at],
            self.timestamps[at],
            self.payloads[at],
            self.versions[at],
            self.deliveries[at],
            0 if self.priorities is None else self.priorities[at],
            "" if self.keys is None else self.keys[at],
            b"" if self.headers is None else self.headers[at],
        )

    def __iter__(self) -> Iterator[LeasedMessage]:
        return map(
            LeasedMessage,
            self.ids,
            self.timestamps,
            self.payloads,
            self.versions,
            self.deliveries,
            repeat(0) if self.priorities is None else self.priorities,
            repeat("") if self.keys is None else self.keys,
            repeat(b"") if self.headers is None else self.headers,
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]  # equal to a list: as unhashable

    def __repr__(self) -> str:
        return f"Deliveries({list(self)!r})"


def columns(messages: Sequence[LeasedMessage]) -> Deliveries:
    """``messages`` as columns: itself when it is ``Deliveries`` already."""
    if isinstance(messages, Deliveries):
        return messages
    return Deliveries.of(messages)
