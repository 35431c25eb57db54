"""The deliveries a consumer holds ready, handed out round the keys.

The broker shares each lease pass fairly among the keys with due messages
(docs/keys.md), but a consumer's credit window still queues what it was sent:
behind two thousand deliveries of one campaign, a reminder of another key
would wait for the application to get through them all. Handing the ready
deliveries out one key at a time, in turn, keeps that share inside the
consumer too: the reminder is next. Within a key the order is the order they
came in (due-time order); deliveries without a key take turns as one key.

One queue per key with deliveries ready, and a ring of those keys; a key leaves
the ring when its queue empties. A stretch of one key's deliveries may join
its queue as one ``Run`` (a frame without keys): its items are taken one at a
time by ``popleft``, or what is left of it at once by ``take_batch``, and
never looked at before (a frame's items are built as they are taken).

A stretch of deliveries of distinct keys, none of which has a delivery in the
buffer already (many keys of a message or two each: users' reminders), joins
the ring as one ``Block``: it stands for that many keys of one delivery each,
in order, which is where each would have joined on its own and what the ring
would hand out, with no queue a key (``add_keyed``). Should a delivery of one
of its keys come while it waits, the blocks waiting are spread into a queue a
key first (``_spread``), so that delivery waits behind its key's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Generic, Protocol, TypeVar, cast


class Keyed(Protocol):
    @property
    def key(self) -> str: ...


D = TypeVar("D", bound=Keyed)


class Run(Generic[D]):
    """Items of one key, in order, taken from ``at`` on. ``popleft`` takes them
    from ``build()``'s list, made when it takes the first (``items`` itself
    when there is no ``build``); ``take_batch`` takes what is left of ``items``."""

    __slots__ = ("at", "build", "built", "end", "items")

    def __init__(self, items: Sequence[D], build: Callable[[], Sequence[D]] | None = None) -> None:
        self.items = items
        self.build = build
        self.built: Sequence[D] | None = None if build is not None else items
        self.at = 0
        self.end = len(items)  # read a pop each: a batch's len() is a Python call


class Block(Run[D]):
    """Items of distinct ``keys`` (``names``: the set of them), one each, taken
    in order from ``at`` on, as a ``Run``'s."""

    __slots__ = ("keys", "names")

    def __init__(
        self,
        items: Sequence[D],
        keys: Sequence[str],
        names: set[str],
        build: Callable[[], Sequence[D]] | None,
    ) -> None:
        super().__init__(items, build)
        self.keys = keys
        self.names = names


class FairBuffer(Generic[D]):
    """A FIFO per key, popped round the keys."""

    __slots__ = ("_blocks", "_queues", "_ring", "_size")

    def __init__(self) -> None:
        self._queues: dict[str, deque[D | Run[D]]] = {}
        # Keys with deliveries, the next to go first; a Block stands for several.
        self._ring: deque[str | Block[D]] = deque()
        # The blocks in the ring, in ring order (none rotates: the first to
        # finish is the first here).
        self._blocks: deque[Block[D]] = deque()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def extend(self, deliveries: Iterable[D]) -> None:
        items = deliveries if isinstance(deliveries, list) else list(deliveries)
        self.add_keyed(items, [d.key for d in items])

    def add_keyed(
        self,
        items: Sequence[D],
        keys: Sequence[str],
        build: Callable[[], Sequence[D]] | None = None,
    ) -> None:
        """``items`` in order, ``keys`` theirs (``build``: ``items`` as a list, at
        once, the first time one is popped). As one ``Block`` when their keys
        are distinct and none has a delivery in the buffer, else each to its
        key's queue."""
        if not items:
            return
        names = set(keys)
        if len(names) == len(keys) and self._queues.keys().isdisjoint(names):
            if not self._blocks or self._apart(names):
                block = Block(items, keys, names, build)
                self._ring.append(block)
                self._blocks.append(block)
                self._size += len(items)
                return
        if self._blocks and not self._apart(names):
            self._spread()
        queues, ring = self._queues, self._ring
        built = items if build is None else build()
        for key, d in zip(keys, built, strict=True):
            queue = queues.get(key)
            if queue is None:
                queue = queues[key] = deque()
                ring.append(key)
            queue.append(d)
        self._size += len(items)

    def add_run(
        self, key: str, items: Sequence[D], build: Callable[[], Sequence[D]] | None = None
    ) -> None:
        """``items``, all of ``key``, in order, as one entry of its queue
        (``build``: ``items`` as a list, at once, the first time one is popped)."""
        if not items:
            return
        queue = self._queues.get(key)
        if queue is None:
            if self._blocks and not self._apart({key}):
                self._spread()
                queue = self._queues.get(key)
            if queue is None:
                queue = self._queues[key] = deque()
                self._ring.append(key)
        queue.append(Run(items, build))
        self._size += len(items)

    def _apart(self, names: set[str]) -> bool:
        """Whether no block waiting holds one of ``names`` (one it handed out
        already may count: then the blocks are spread for nothing, no harm)."""
        return all(names.isdisjoint(b.names) for b in self._blocks)

    def _spread(self) -> None:
        """Every block waiting as a queue a key of its items left, in its place."""
        ring: deque[str | Block[D]] = deque()
        queues = self._queues
        for entry in self._ring:
            if isinstance(entry, Block):
                built = _built(entry)
                at = entry.at
                for key, d in zip(entry.keys[at:], built[at:], strict=True):
                    queues[key] = deque((d,))
                    ring.append(key)
            else:
                ring.append(entry)
        self._ring = ring
        self._blocks.clear()

    def popleft(self) -> D:
        """The next delivery: the head of the next key's queue in the ring."""
        ring = self._ring
        key = ring[0]
        self._size -= 1
        if not isinstance(key, str):  # a block
            built = key.built
            if built is None:
                built = key.built = key.build()  # type: ignore[misc]
            at = key.at
            d = built[at]
            key.at = at = at + 1
            if at == key.end:
                ring.popleft()
                self._blocks.popleft()
            return d
        queue = self._queues[key]
        head = queue[0]
        if isinstance(head, Run):
            built = head.built
            if built is None:
                built = head.built = head.build()  # type: ignore[misc]
            at = head.at
            d = built[at]
            head.at = at = at + 1
            if at == head.end:
                queue.popleft()
        else:
            d = cast(D, queue.popleft())  # the head, not a run
        if queue:
            ring.rotate(-1)
        else:
            ring.popleft()
            del self._queues[key]
        return d

    def take_batch(self) -> Sequence[D]:
        """Deliveries ready, at least one: the rest of a run or a block when it is
        all the buffer holds (in one piece, nothing built), else every one in
        ``popleft`` order."""
        ring = self._ring
        if len(ring) == 1:
            key = ring[0]
            if isinstance(key, Block):
                rest = key.items[key.at :] if key.at else key.items
                ring.popleft()
                self._blocks.popleft()
                self._size -= len(rest)
                return rest
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
        self._blocks.clear()
        self._size = 0


def _built(run: Run[D]) -> Sequence[D]:
    """A run's items as built (built the first time)."""
    built = run.built
    if built is None:
        built = run.built = run.build()  # type: ignore[misc]
    return built
