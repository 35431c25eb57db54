"""This broker's consumer keys in etcd, kept equal to the streams open here.

A consumer stream opening or closing changes the wanted set (``want``); the
session's registrar task (``run``) then puts the keys that are missing and
deletes those no longer wanted, under the session's lease. A new session
starts with nothing registered, so its first round puts them all again.
Like ``hints.py`` it knows nothing of etcd: the session passes the writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Set

from dejaq.broker.tasks import raise_if_cancelled

Registration = tuple[str, str]  # (topic, consumer id) with a stream open on this broker
Write = Callable[[str, str], Awaitable[None]]  # put or delete the key of (topic, consumer)


class Registrar:
    """The consumer registrations this broker wants, and the rounds that write them."""

    def __init__(self) -> None:
        self._wanted: frozenset[Registration] = frozenset()
        self._dirty = asyncio.Event()  # _wanted changed since the last round began

    def want(self, wanted: Set[Registration]) -> None:
        """From now on, exactly ``wanted`` should be registered."""
        self._wanted = frozenset(wanted)
        self._dirty.set()

    async def sync(self, registered: set[Registration], put: Write, delete: Write) -> None:
        """One round: write what differs between ``registered`` and the wanted set,
        updating ``registered`` as each write succeeds."""
        want = self._wanted
        for topic, consumer in sorted(want - registered):
            await put(topic, consumer)
            registered.add((topic, consumer))
        for topic, consumer in sorted(registered - want):
            await delete(topic, consumer)
            registered.discard((topic, consumer))

    async def run(self, registered: set[Registration], put: Write, delete: Write) -> None:
        """A round now, then one after every change, until cancelled; a failed
        write ends the loop."""
        while True:
            self._dirty.clear()
            await self.sync(registered, put, delete)
            raise_if_cancelled()  # the write may have swallowed a cancel
            await self._dirty.wait()
