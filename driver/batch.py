"""A delivery frame as the consumer holds it: columns, and a delivery object
only for the messages the application touches.

A frame of deliveries is decoded a column at a time (``core/wire/batches.py``)
and kept as those columns (``Frame``). ``DeliveryBatch`` is a sequence over a
stretch of them: ``batch[i]`` builds that message's ``Delivery`` the first time
it is asked for (the same one after), and ``ack_all()`` / ``nack_all()``
settle every message of the batch not settled yet straight from the id and
version columns, with no object a message. The ``async for`` loop takes its
deliveries one at a time through the same ``batch[i]``, so a frame whose
messages are still buffered costs no object for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from itertools import repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, overload

from dejaq.core.wire.batches import DeliveryColumns
from dejaq.driver.delivery import Delivery
from dejaq.proto import dejaq_pb2 as pb

if TYPE_CHECKING:
    from dejaq.driver.settle import SettleBatcher


class Frame:
    """One delivery frame's columns, the deliveries built from them so far, and
    which of its messages a batch settled without building one."""

    __slots__ = ("columns", "lease_ms", "made", "settled", "settler")

    def __init__(self, columns: DeliveryColumns, settler: SettleBatcher, lease_ms: int) -> None:
        self.columns = columns
        self.settler = settler
        self.lease_ms = lease_ms
        n = len(columns.ids)
        self.made: list[Delivery | None] = [None] * n
        self.settled = bytearray(n)  # 1: settled by its batch's ack_all or nack_all

    def __len__(self) -> int:
        return len(self.made)

    def build(self, start: int, stop: int, received_at_ms: int) -> list[Delivery]:
        """The deliveries ``start`` to ``stop``, built together (those built
        already as they are)."""
        made = self.made
        if any(made[start:stop]):
            return [self.delivery(i, received_at_ms) for i in range(start, stop)]
        c, settler, lease = self.columns, self.settler, self.lease_ms
        until = c.lease_until
        if c.priorities is None and c.keys is None and c.headers is None:
            out = [
                Delivery(i, t, p, v, n, until, received_at_ms, settler, lease)
                for i, t, p, v, n in zip(
                    c.ids[start:stop],
                    c.timestamps[start:stop],
                    c.payloads[start:stop],
                    c.versions[start:stop],
                    c.deliveries[start:stop],
                    strict=True,
                )
            ]
        else:
            n = stop - start
            out = list(
                map(
                    Delivery,
                    c.ids[start:stop],
                    c.timestamps[start:stop],
                    c.payloads[start:stop],
                    c.versions[start:stop],
                    c.deliveries[start:stop],
                    repeat(until, n),
                    repeat(received_at_ms, n),
                    repeat(settler, n),
                    repeat(lease, n),
                    repeat(0, n) if c.priorities is None else c.priorities[start:stop],
                    repeat("", n) if c.keys is None else c.keys[start:stop],
                    repeat(b"", n) if c.headers is None else c.headers[start:stop],
                )
            )
        made[start:stop] = out
        settled = self.settled
        if any(settled[start:stop]):
            for i in range(start, stop):
                if settled[i]:
                    made[i]._settled = True  # type: ignore[union-attr]
        return out

    def delivery(self, i: int, received_at_ms: int) -> Delivery:
        d = self.made[i]
        if d is not None:
            return d
        c = self.columns
        if c.priorities is None and c.keys is None and c.headers is None:
            d = Delivery(
                c.ids[i],
                c.timestamps[i],
                c.payloads[i],
                c.versions[i],
                c.deliveries[i],
                c.lease_until,
                received_at_ms,
                self.settler,
                self.lease_ms,
            )
        else:
            d = Delivery(
                c.ids[i],
                c.timestamps[i],
                c.payloads[i],
                c.versions[i],
                c.deliveries[i],
                c.lease_until,
                received_at_ms,
                self.settler,
                self.lease_ms,
                0 if c.priorities is None else c.priorities[i],
                "" if c.keys is None else c.keys[i],
                b"" if c.headers is None else c.headers[i],
            )
        self.made[i] = d
        if self.settled[i]:
            d._settled = True
        return d


# The frame's columns a batch reads straight.
_IDS, _TIMESTAMPS, _PAYLOADS = attrgetter("ids"), attrgetter("timestamps"), attrgetter("payloads")


class DeliveryBatch(Sequence[Delivery]):
    """Deliveries taken together (``Consumer.batches()``): a sequence of
    ``Delivery``, each built when first touched. ``ids``, ``timestamps`` and
    ``payloads`` read the columns directly. ``ack_all()`` and
    ``nack_all(delay_ms)`` settle every message of the batch not settled yet;
    a message may still be settled on its own (``batch[i].ack()``)."""

    __slots__ = ("_frame", "_items", "_start", "_stop", "received_at_ms")

    def __init__(
        self,
        frame: Frame | None,
        start: int,
        stop: int,
        received_at_ms: int,
        items: list[Delivery] | None = None,
    ) -> None:
        self._frame = frame
        self._start = start
        self._stop = stop
        self._items = items  # a batch of deliveries already built (keyed, or held apart)
        self.received_at_ms = received_at_ms

    @classmethod
    def of(cls, deliveries: list[Delivery]) -> DeliveryBatch:
        """A batch of deliveries already built."""
        return cls(None, 0, len(deliveries), 0, deliveries)

    def __len__(self) -> int:
        return self._stop - self._start

    def __repr__(self) -> str:
        return f"DeliveryBatch({len(self)} deliveries)"

    @overload
    def __getitem__(self, i: int) -> Delivery: ...

    @overload
    def __getitem__(self, i: slice) -> DeliveryBatch: ...

    def __getitem__(self, i: int | slice) -> Delivery | DeliveryBatch:
        if isinstance(i, slice):
            start, stop, step = i.indices(len(self))
            if step != 1:
                raise ValueError("a batch slices with step 1 only")
            stop = max(start, stop)
            if self._items is not None:
                return DeliveryBatch.of(self._items[start:stop])
            return DeliveryBatch(
                self._frame, self._start + start, self._start + stop, self.received_at_ms
            )
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("batch index out of range")
        if self._items is not None:
            return self._items[i]
        assert self._frame is not None
        return self._frame.delivery(self._start + i, self.received_at_ms)

    def build(self) -> list[Delivery]:
        """Every delivery of the batch, built together (for a loop that takes them all)."""
        if self._items is not None:
            return self._items
        assert self._frame is not None
        return self._frame.build(self._start, self._stop, self.received_at_ms)

    def __iter__(self) -> Iterator[Delivery]:
        if self._items is not None:
            return iter(self._items)
        frame, received = self._frame, self.received_at_ms
        assert frame is not None
        return (frame.delivery(i, received) for i in range(self._start, self._stop))

    # A batch of deliveries built already reads each one's attribute in a
    # comprehension: a slot read a message, where a getter called a message
    # costs twice the time; the frame's columns are sliced by one helper.
    @property
    def ids(self) -> list[str]:
        if self._items is not None:
            return [d.id for d in self._items]
        return self._column(_IDS)

    @property
    def keys(self) -> list[str] | None:
        """Each message's key ("" = none); None when none has one."""
        if self._items is not None:
            keys = [d.key for d in self._items]
            return keys if any(keys) else None
        assert self._frame is not None
        c = self._frame.columns.keys
        return None if c is None else c[self._start : self._stop]

    @property
    def timestamps(self) -> list[int]:
        """Each message's due time, epoch ms (see ``Delivery.timestamp_ms``)."""
        if self._items is not None:
            return [d.timestamp_ms for d in self._items]
        return self._column(_TIMESTAMPS)

    @property
    def payloads(self) -> list[bytes]:
        if self._items is not None:
            return [d.payload for d in self._items]
        return self._column(_PAYLOADS)

    def _column(self, column: attrgetter[Any]) -> list[Any]:
        """The frame's ``column`` over the batch's stretch of it."""
        assert self._frame is not None
        return column(self._frame.columns)[self._start : self._stop]  # type: ignore[no-any-return]

    def built(self) -> list[Delivery]:
        """The deliveries of the batch built so far (touched by the application)."""
        if self._items is not None:
            return self._items
        assert self._frame is not None
        return [d for d in self._frame.made[self._start : self._stop] if d is not None]

    def unsettled(self) -> list[Delivery]:
        """The deliveries of the batch not settled yet (building those not built)."""
        if self._items is not None:
            return [d for d in self._items if not d._settled]
        frame = self._frame
        assert frame is not None
        settled, made = frame.settled, frame.made
        return [
            frame.delivery(i, self.received_at_ms)
            for i in range(self._start, self._stop)
            if not settled[i] and not ((d := made[i]) is not None and d._settled)
        ]

    async def ack_all(self, *, confirm: bool = False) -> None:
        """Ack every message of the batch not settled yet (see ``Delivery.ack``)."""
        await self._settle_all(pb.Settle.ACK, 0, confirm)

    async def nack_all(self, delay_ms: int = 0, *, confirm: bool = False) -> None:
        """Nack every message of the batch not settled yet, due again in ``delay_ms``."""
        await self._settle_all(pb.Settle.NACK, delay_ms, confirm)

    async def _settle_all(self, kind: int, ms: int, confirm: bool) -> None:
        frame = self._frame
        if confirm or frame is None:
            # Each waits for its own answer, or the deliveries are built already.
            await _each(self.unsettled(), kind, ms, confirm)
            return
        settler = frame.settler
        if settler.crowded:
            await settler.room()
        c, made, settled = frame.columns, frame.made, frame.settled
        ids: list[str] = []
        versions: list[int] = []
        built: list[Delivery] = []
        for i in range(self._start, self._stop):
            if settled[i]:
                continue
            d = made[i]
            if d is None:
                settled[i] = 1
                ids.append(c.ids[i])
                versions.append(c.versions[i])
            elif not d._settled:
                built.append(d)
        if ids:
            settler.add_columns(kind, ids, versions, ms)
        if built:
            await _each(built, kind, ms, False)


async def _each(deliveries: list[Delivery], kind: int, ms: int, confirm: bool) -> None:
    """Settle each of ``deliveries`` on its own (all at once when confirmed)."""
    settle = [
        d.ack(confirm=confirm) if kind == pb.Settle.ACK else d.nack(ms, confirm=confirm)
        for d in deliveries
    ]
    if confirm:
        await asyncio.gather(*settle)
    else:
        for s in settle:
            await s
