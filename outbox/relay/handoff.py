"""Handing claimed rows to dejaq, idempotently by id: the rules, stated once.

Each row ends accepted (its message is on the topic: a duplicate id counts,
as it is a retry of a hand-over a crash cut short) or refused for good, with
the reason it is parked with. Anything else (no broker reachable, a storage
unavailable, the relay not allowed yet) raises: the batch is rolled back and
tried again, and no row is lost.

A subclass says how to reach dejaq: through the driver (a relay of its own)
or straight into a broker's handlers (a relay the broker runs).
"""

from __future__ import annotations

import abc
from collections import defaultdict
from collections.abc import Sequence

from dejaq.core.errors import (
    AlreadyExists,
    InvalidArgument,
    Leased,
    NotFound,
    StaleVersion,
    WrongKind,
)
from dejaq.outbox import sql
from dejaq.outbox.relay.claimed import Claimed

# Errors that say a row can never be accepted as it is: it is parked.
FOR_GOOD = (InvalidArgument, NotFound, WrongKind, AlreadyExists, Leased)
STALE_TRIES = 5  # a move or cancel read a version another writer changed meanwhile


class HandOff(abc.ABC):
    async def rows(self, rows: Sequence[Claimed]) -> dict[int, str]:
        """Hand ``rows`` over; the reasons of those refused for good, by seq.
        A batch holds at most one row of a message (the claim leaves a later
        one for the next batch), so their order within it does not matter."""
        refused: dict[int, str] = {}
        by_topic: dict[str, list[Claimed]] = defaultdict(list)
        for row in rows:
            if row.op == sql.SCHEDULE:
                by_topic[row.topic].append(row)
            else:
                reason = await self._change(row)
                if reason is not None:
                    refused[row.seq] = reason
        for topic, scheduled in by_topic.items():
            refused |= await self._schedule(topic, scheduled)
        return refused

    async def close(self) -> None:
        """Release what the hand-over holds (streams, say); nothing by default."""
        return None

    @abc.abstractmethod
    async def send(self, topic: str, rows: Sequence[Claimed]) -> list[str | None]:
        """Produce ``rows`` on ``topic`` by their ids: for each, None when
        accepted (or a duplicate), else why it was refused. Raises a
        ``FOR_GOOD`` error when the whole frame is refused."""

    @abc.abstractmethod
    async def version(self, topic: str, id: str) -> int:
        """The version of message ``id`` (``NotFound`` when there is none)."""

    @abc.abstractmethod
    async def move(self, topic: str, id: str, version: int, at_ms: int) -> None: ...

    @abc.abstractmethod
    async def cancel(self, topic: str, id: str, version: int) -> None: ...

    async def _schedule(self, topic: str, rows: list[Claimed]) -> dict[int, str]:
        try:
            return _refused(rows, await self.send(topic, rows))
        except FOR_GOOD as exc:
            if len(rows) == 1:
                return {rows[0].seq: reason(exc)}
        # The whole frame was refused: alone, each row meets its own fate.
        refused: dict[int, str] = {}
        for row in rows:
            try:
                refused |= _refused([row], await self.send(topic, [row]))
            except FOR_GOOD as exc:
                refused[row.seq] = reason(exc)
        return refused

    async def _change(self, row: Claimed) -> str | None:
        """Move or cancel ``row``'s message; None when done, else why not."""
        for _ in range(STALE_TRIES):
            try:
                version = await self.version(row.topic, row.msg_id)
                if row.op == sql.MOVE:
                    await self.move(row.topic, row.msg_id, version, row.at_ms)
                else:
                    await self.cancel(row.topic, row.msg_id, version)
                return None
            except StaleVersion:
                continue
            except NotFound as exc:
                # Nothing to cancel (delivered already, or cancelled by a retry
                # of this row) is what a cancel wants.
                return None if row.op == sql.CANCEL else reason(exc)
            except FOR_GOOD as exc:
                return reason(exc)
        return f"the message changed {STALE_TRIES} times while the relay tried to {row.op} it"


def _refused(rows: Sequence[Claimed], reasons: list[str | None]) -> dict[int, str]:
    return {row.seq: why for row, why in zip(rows, reasons, strict=True) if why is not None}


def reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
