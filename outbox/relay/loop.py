"""One relay on one outbox: claim committed rows, hand them over, delete them.

Rows are claimed with ``FOR UPDATE SKIP LOCKED`` in one transaction that
also deletes them once dejaq accepted them, so several relays share an
outbox: each takes rows no other holds. A relay killed mid-batch leaves its
rows to the next claim, whose hand-over dejaq absorbs by id. The relay sleeps
until a commit that wrote rows notifies it (``LISTEN``), or its poll interval
passes: a notification lost with a dropped connection delays rows, never
loses them.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, NamedTuple

from dejaq.core.backoff import Backoff
from dejaq.core.redact import redact
from dejaq.outbox import sql
from dejaq.outbox.connect import psycopg_module
from dejaq.outbox.relay.claimed import Claimed
from dejaq.outbox.relay.handoff import HandOff
from dejaq.outbox.relay.metrics import RelayMetrics

log = logging.getLogger("dejaq.outbox.relay")

DEFAULT_BATCH = 500
DEFAULT_POLL_MS = 500
RETRY = Backoff(0.05, 5.0)  # seconds, after the database or the brokers failed


class Relay:
    """Relays the outbox at ``url`` through ``handoff`` until stopped."""

    def __init__(
        self,
        url: str,
        handoff: HandOff,
        *,
        batch: int = DEFAULT_BATCH,
        poll_ms: int = DEFAULT_POLL_MS,
        metrics: RelayMetrics | None = None,
    ) -> None:
        self.url = url
        self.name = redact(url)
        self.batch = batch
        self.poll_s = poll_ms / 1000
        self.metrics = metrics or RelayMetrics()
        self.handoff = handoff
        self._work: Any = None
        self._listen: Any = None
        self._delete = sql.DELETE_DONE

    async def run(self, stop: asyncio.Event | None = None) -> None:
        """Relay until ``stop`` is set (or the task is cancelled); a lost
        database or broker is waited for, with back-off."""
        stop = stop or asyncio.Event()
        failures = 0
        try:
            while not stop.is_set():
                try:
                    await self._connect()
                    while not stop.is_set():
                        if await self.drain() == 0:
                            await self._wait()
                        failures = 0
                except Exception as exc:  # any failure: nothing is deleted before acceptance
                    log.warning("outbox %s: %s; trying again", self.name, redact(str(exc)))
                    await self._disconnect()
                    await asyncio.sleep(RETRY.delay(failures))
                    failures += 1
        finally:
            await self.close()

    async def drain(self) -> int:
        """Relay batches until none is left to claim; the rows relayed. (A batch
        may come back short while rows wait: a later row of a message waits
        for the batch that holds its earlier one.)"""
        return await self._batches(until_empty=True)

    async def relay_once(self) -> int:
        """Claim one batch, hand it over, delete (or park) its rows; how many."""
        return await self._batches(until_empty=False)

    async def _batches(self, until_empty: bool) -> int:
        """Relay batches, one or until a claim finds none; the rows relayed.

        The connection pipelines its statements: a batch's deletes and COMMIT
        go with the next batch's BEGIN and claim, one round trip to the
        database a batch (the claim runs after the COMMIT, so it sees the rows
        gone). Each round trip is a wake-up of the relay and of its server
        process, a wait for a core on a busy machine, and every row waits for
        the batches ahead of it."""
        await self._connect()
        conn = self._work
        total = 0
        sent: _Sent | None = None  # the batch whose COMMIT went, not yet confirmed
        parked = False
        try:
            async with conn.pipeline():
                while True:
                    await conn.execute(sql.BEGIN)
                    cur = await conn.execute(sql.CLAIM, (self.batch,))
                    claimed = [Claimed(*row) for row in await cur.fetchall()]
                    # The claim's answer came after the COMMIT's: that batch is done.
                    parked |= await self._done(sent)
                    sent = None
                    if not claimed:
                        await conn.execute(sql.COMMIT)
                        break
                    sent = await self._hand_over(conn, claimed)
                    total += len(claimed)
                    if not until_empty:
                        break
        except BaseException:
            await _rollback(conn)
            raise
        parked |= await self._done(sent)  # the pipeline's end confirmed it
        if parked:
            await self._count_parked()
        return total

    async def _hand_over(self, conn: Any, claimed: list[Claimed]) -> _Sent:
        """Hand ``claimed`` over, then send the deletes (or parks) and COMMIT."""
        refused = await self.handoff.rows(claimed)
        accepted = [row.seq for row in claimed if row.seq not in refused]
        deleted = await conn.execute(self._delete, (accepted,)) if accepted else None
        for seq, reason in refused.items():
            await conn.execute(sql.PARK, (seq, reason))
        await conn.execute(sql.COMMIT)
        return _Sent(deleted, len(accepted), len(refused))

    async def _done(self, sent: _Sent | None) -> bool:
        """The metrics of a batch now committed; whether it parked rows."""
        if sent is None:
            return False
        if sent.deleted is not None:
            lag = self.metrics.lag.labels(self.name)
            for (seconds,) in await sent.deleted.fetchall():
                lag.observe(max(seconds, 0.0))
        self.metrics.relayed.labels(self.name).inc(sent.accepted)
        if sent.refused:
            log.warning("outbox %s: parked %d rows", self.name, sent.refused)
        return sent.refused > 0

    async def close(self) -> None:
        await self.handoff.close()
        await self._disconnect()

    async def _connect(self) -> None:
        if self._work is not None:
            return
        psycopg = psycopg_module()
        # Transactions are begun and ended by the relay's own statements, so
        # that BEGIN and COMMIT ride in the pipeline with the others.
        self._work = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        self._listen = await psycopg.AsyncConnection.connect(self.url, autocommit=True)
        await self._listen.execute(sql.LISTEN)
        cur = await self._listen.execute(sql.COMMIT_TIMES)
        (commit_times,) = await cur.fetchone()
        self._delete = sql.DELETE_DONE_FROM_COMMIT if commit_times else sql.DELETE_DONE
        await self._count_parked()

    async def _disconnect(self) -> None:
        for conn in (self._work, self._listen):
            if conn is not None:
                try:
                    await conn.close()
                except Exception as exc:  # closing a broken connection says nothing new
                    log.debug("outbox %s: closing: %s", self.name, exc)
        self._work = self._listen = None

    async def _wait(self) -> None:
        """Until a commit notifies, or the poll interval passes (then the parked
        rows are counted again: an operator may have cleared them)."""
        async for _ in self._listen.notifies(timeout=self.poll_s, stop_after=1):
            return
        await self._count_parked()

    async def _count_parked(self) -> None:
        async with self._work.transaction():
            cur = await self._work.execute(f"SELECT count(*) FROM {sql.PARKED}")
            (parked,) = await cur.fetchone()
        self.metrics.parked.labels(self.name).set(parked)


class _Sent(NamedTuple):
    """A batch handed over, its deletes and COMMIT sent."""

    deleted: Any  # the cursor of its DELETE, None when every row was parked
    accepted: int
    refused: int


async def _rollback(conn: Any) -> None:
    """End a batch that failed: nothing deleted, its rows free for the next
    claim. A connection too broken for it is closed by the caller anyway."""
    try:
        await conn.execute(sql.ROLLBACK)
    except Exception as exc:  # the error being raised says more
        log.debug("rolling back: %s", exc)
