"""The deliveries a consumer holds ready, handed out round the keys.

The broker shares each lease pass fairly among the keys with due messages
(docs/keys.md), but a consumer's credit window still queues what it was sent:
behind two thousand deliveries of one campaign, a reminder of another key
would wait for the application to get through them all. Handing the ready
deliveries out one key at a time, in turn, keeps that share inside the
consumer too: the reminder is next. Within a key the order is the order they
came in (due-time order); deliveries without a key take turns as one key.

One queue per key with deliveries ready, and a ring of those keys; a key leaves
the ring when its queue empties. A consumer that only ever sees one key (or
none) pays a dict lookup a delivery.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Generic, Protocol, TypeVar


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


D = TypeVar("D", bound=Keyed)


class FairBuffer(Generic[D]):
    """A FIFO per key, popped round the keys."""

    __slots__ = ("_queues", "_ring", "_size")

    def __init__(self) -> None:
        self._queues: dict[str, deque[D]] = {}
        self._ring: deque[str] = deque()  # keys with deliveries, the next to go first
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def extend(self, deliveries: Iterable[D]) -> None:
        queues = self._queues
        for d in deliveries:
            key = d.key
            queue = queues.get(key)
            if queue is None:
                queue = queues[key] = deque()
                self._ring.append(key)
            queue.append(d)
            self._size += 1

    def popleft(self) -> D:
        """The next delivery: the head of the next key's queue in the ring."""
        ring = self._ring
        key = ring[0]
        queue = self._queues[key]
        d = queue.popleft()
        self._size -= 1
        if queue:
            ring.rotate(-1)
        else:
            ring.popleft()
            del self._queues[key]
        return d

    def drain(self) -> list[D]:
        """Every delivery, in the order ``popleft`` would give them."""
        return [self.popleft() for _ in range(self._size)]

    def clear(self) -> None:
        self._queues.clear()
        self._ring.clear()
        self._size = 0
