"""Handing claimed rows to dejaq through the driver, idempotently by id.

Each row ends accepted (its message is on the topic: a duplicate id counts,
as it is a retry of a hand-over a crash cut short) or refused for good, with
the reason it is parked with. Anything else (no broker reachable, a storage
unavailable, the relay not allowed yet) raises: the batch is rolled back and
tried again, and no row is lost.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from dejaq.core import headers as header_codec
from dejaq.core.errors import (
    AlreadyExists,
    InvalidArgument,
    Leased,
    NotFound,
    StaleVersion,
    WrongKind,
)
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from dejaq.outbox import sql
from dejaq.outbox.relay.claimed import Claimed

# Errors that say a row can never be accepted as it is: it is parked.
FOR_GOOD = (InvalidArgument, NotFound, WrongKind, AlreadyExists, Leased)
STALE_TRIES = 5  # a move or cancel read a version another writer changed meanwhile


class HandOff:
    """What one relay keeps between batches: a producer per topic."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.admin = Admin(client)
        self.producers: dict[str, Producer] = {}

    async def close(self) -> None:
        for producer in self.producers.values():
            await producer.close()
        self.producers.clear()

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

    async def _schedule(self, topic: str, rows: list[Claimed]) -> dict[int, str]:
        try:
            return await self._send(topic, rows)
        except FOR_GOOD as exc:
            if len(rows) == 1:
                return {rows[0].seq: _reason(exc)}
        # The whole frame was refused: alone, each row meets its own fate.
        refused: dict[int, str] = {}
        for row in rows:
            try:
                refused |= await self._send(topic, [row])
            except FOR_GOOD as exc:
                refused[row.seq] = _reason(exc)
        return refused

    async def _send(self, topic: str, rows: list[Claimed]) -> dict[int, str]:
        producer = self.producers.get(topic)
        if producer is None:
            producer = self.producers[topic] = Producer(self.client, topic)
        try:
            results = await producer.send_batch([_outgoing(row) for row in rows])
        except BaseException:
            # The stream may be spent: the next batch opens a new one.
            del self.producers[topic]
            await producer.close()
            raise
        return {
            row.seq: _reason(result.error) if result.error else "refused"
            for row, result in zip(rows, results, strict=True)
            if not (result.accepted or result.status.name == "DUPLICATE")
        }

    async def _change(self, row: Claimed) -> str | None:
        """Move or cancel ``row``'s message; None when done, else why not."""
        for _ in range(STALE_TRIES):
            try:
                version = (await self.admin.get(row.topic, row.msg_id)).message.version
                if row.op == sql.MOVE:
                    await self.admin.move(row.topic, row.msg_id, version, row.at_ms)
                else:
                    await self.admin.cancel(row.topic, row.msg_id, version)
                return None
            except StaleVersion:
                continue
            except NotFound as exc:
                # Nothing to cancel (delivered already, or cancelled by a retry
                # of this row) is what a cancel wants.
                return None if row.op == sql.CANCEL else _reason(exc)
            except FOR_GOOD as exc:
                return _reason(exc)
        return f"the message changed {STALE_TRIES} times while it was being {row.op}d"


def _outgoing(row: Claimed) -> Outgoing:
    return Outgoing(
        row.payload,
        row.at_ms,
        row.msg_id,
        row.max_deliveries,
        row.expires_at_ms,
        row.priority,
        row.key,
        header_codec.decode(row.headers) if row.headers else None,
    )


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"
