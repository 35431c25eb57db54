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
none) pays a dict lookup a delivery. A stretch of one key's deliveries may
join its queue as one ``Run`` (a frame without keys): its items are taken one
at a time by ``popleft``, or what is left of it at once by ``take_batch``, and
never looked at before (a frame's items are built as they are taken).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, Protocol, TypeVar


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


D = TypeVar("D", bound=Keyed)


class Run(Generic[D]):
    """Items of one key, in order, taken from ``at`` on. ``popleft`` takes them
    from ``build()``'s list, made when it takes the first (``items`` itself
    when there is no ``build``); ``take_batch`` takes what is left of ``items``."""

    __slots__ = ("at", "build", "built", "items")

    def __init__(self, items: Sequence[D], build: Callable[[], Sequence[D]] | None = None) -> None:
        self.items = items
        self.build = build
        self.built: Sequence[D] | None = None if build is not None else items
        self.at = 0


class FairBuffer(Generic[D]):
    """A FIFO per key, popped round the keys."""

    __slots__ = ("_queues", "_ring", "_size")

    def __init__(self) -> None:
        self._queues: dict[str, deque[D | Run[D]]] = {}
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

    def add_run(
        self, key: str, items: Sequence[D], build: Callable[[], Sequence[D]] | None = None
    ) -> None:
        """``items``, all of ``key``, in order, as one entry of its queue
        (``build``: ``items`` as a list, at once, the first time one is popped)."""
        if not items:
            return
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = deque()
            self._ring.append(key)
        queue.append(Run(items, build))
        self._size += len(items)

    def popleft(self) -> D:
        """The next delivery: the head of the next key's queue in the ring."""
        ring = self._ring
        key = ring[0]
        queue = self._queues[key]
        head = queue[0]
        if isinstance(head, Run):
            built = head.built
            if built is None:
                built = head.built = head.build()  # type: ignore[misc]
            d = built[head.at]
            head.at += 1
            if head.at == len(head.items):
                queue.popleft()
        else:
            d = queue.popleft()
        self._size -= 1
        if queue:
            ring.rotate(-1)
        else:
            ring.popleft()
            del self._queues[key]
        return d

    def take_batch(self) -> Sequence[D]:
        """Deliveries ready, at least one: the rest of a run when only its key has
        any (in one piece, nothing built), else every one in ``popleft`` order."""
        ring = self._ring
        if len(ring) == 1:
            key = ring[0]
            queue = self._queues[key]
            head = queue[0]
            if isinstance(head, Run):
                rest = head.items[head.at :] if head.at else head.items
                queue.popleft()
                self._size -= len(rest)
                if not queue:
                    ring.popleft()
                    del self._queues[key]
                return rest
        return self.drain()

    def drain(self) -> list[D]:
        """Every delivery, in the order ``popleft`` would give them."""
        return [self.popleft() for _ in range(self._size)]

    def clear(self) -> None:
        self._queues.clear()
        self._ring.clear()
        self._size = 0
