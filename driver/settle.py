"""Settle grouping: acks, nacks and extends leave in frames, never one by one.

A settle is queued and the caller goes on; everything queued in one event-loop
turn (or up to ``max_batch`` ids of one kind) leaves as one Settle frame, with
the credits the consumer returns riding along. The broker answers each frame
with one SettleResult: new versions and the refusals.

Confirmation is the caller's choice, as with Pulsar's ack receipts or Kafka's
``commitAsync`` / ``commitSync``:

- ``confirm=False`` (the default for ack and nack): the call returns once the
  settle is queued. A refusal (stale version, lease lost to another consumer)
  goes to ``on_error`` (by default a warning in the log) and is kept for the
  next ``flush()``, which raises it as ``SettleRejected``.
- ``confirm=True``: the call waits for the broker's answer and raises the
  refusal itself (extend always confirms: the next settle needs its version).
- ``flush()`` sends what is queued and waits until every settle sent so far is
  answered; the consumer's ``close()`` flushes before saying goodbye.

A settle whose frame was lost with its stream is reported as failed with
``BrokerUnavailable``: it may or may not have been applied. An unacked message
is redelivered when its lease runs out, so nothing is ever lost (at-least-once).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from dejaq.core.errors import BrokerUnavailable, DejaqError
from dejaq.core.wire.status import error_for, status_code
from dejaq.proto import dejaq_pb2 as pb

log = logging.getLogger(__name__)

KIND_NAMES: dict[int, str] = {
    pb.Settle.ACK: "ack",
    pb.Settle.EXTEND: "extend",
    pb.Settle.NACK: "nack",
}


class Held(Protocol):
    """What the batcher needs of a delivery: its id and the version it holds."""

    id: str
    version: int


@dataclass(frozen=True, slots=True)
class SettleFailure:
    """One refused (or possibly lost) settle."""

    id: str
    kind: str  # "ack" | "nack" | "extend"
    error: DejaqError


class SettleRejected(DejaqError):
    """Settles the broker refused (or that were lost with their stream) since the
    last ``flush()``; ``failures`` lists each with its error."""

    def __init__(self, failures: list[SettleFailure]) -> None:
        self.failures = failures
        first = failures[0]
        more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
        super().__init__(f"{first.kind} of {first.id!r} refused: {first.error}{more}")


OnError = Callable[[SettleFailure], None]
Send = Callable[[pb.ConsumeRequest], bool]  # False: not connected, nothing sent


@dataclass(slots=True)
class _Item:
    held: Held
    receipt: asyncio.Future[None] | None  # set when the caller waits for the answer


@dataclass(slots=True)
class _Frame:
    kind: int
    items: list[_Item]


class SettleBatcher:
    """Queues settles and credits, sends them grouped, matches the answers."""

    def __init__(
        self,
        send: Send,
        *,
        max_batch: int = 1000,
        max_unanswered: int = 20_000,
        on_error: OnError | None = None,
    ) -> None:
        self._send = send
        self.max_batch = max_batch
        self.max_unanswered = max_unanswered
        self.on_error = on_error
        self._pending: dict[tuple[int, int], list[_Item]] = {}
        self._credits = 0
        self._flush_scheduled = False
        self._tokens = itertools.count(1)
        self._sent: dict[int, _Frame] = {}
        self._unanswered = 0  # ids queued or sent, not yet answered
        self._room = asyncio.Event()
        self._room.set()
        self._answered = asyncio.Event()
        self._answered.set()
        self._failures: list[SettleFailure] = []
        # While the consumer reconnects, queued settles wait for the new stream.
        self.holding = False

    @property
    def unanswered(self) -> int:
        return self._unanswered

    # -- queueing -------------------------------------------------------------

    async def settle(self, kind: int, held: Held, ms: int, confirm: bool) -> None:
        """Queue one settle; with ``confirm`` wait for the broker's answer."""
        if self._unanswered >= self.max_unanswered:
            await self._room.wait()  # back-pressure: the broker is behind
        receipt = asyncio.get_running_loop().create_future() if confirm else None
        item = _Item(held, receipt)
        group = self._pending.setdefault((kind, ms), [])
        group.append(item)
        self._count(1)
        if len(group) >= self.max_batch:
            self.send_now()
        else:
            self._schedule()
        if receipt is not None:
            await receipt

    def credit(self, n: int, threshold: int) -> None:
        """Return ``n`` credits: they ride with the next settle frame, or leave alone
        at the end of this turn once ``threshold`` have gathered (0: at once)."""
        self._credits += n
        if self._credits >= threshold:
            self._schedule()

    def forget_credits(self) -> None:
        """A new stream's Hello states the whole window: credits not yet sent are moot."""
        self._credits = 0

    def _schedule(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self.send_now)

    def send_now(self) -> None:
        """Send everything queued: one frame per (kind, ms) group, credits on the first."""
        self._flush_scheduled = False
        if self.holding:
            return
        pending, self._pending = self._pending, {}
        for (kind, ms), items in pending.items():
            for start in range(0, len(items), self.max_batch):
                self._send_frame(kind, ms, items[start : start + self.max_batch])
        if self._credits:
            credits, self._credits = self._credits, 0
            if not self._send(pb.ConsumeRequest(credits=credits)):
                self._credits += credits  # returned when connected again

    def _send_frame(self, kind: int, ms: int, items: list[_Item]) -> None:
        token = next(self._tokens)
        credits, self._credits = self._credits, 0
        frame = pb.Settle(
            kind=kind,  # type: ignore[arg-type]
            ids=[i.held.id for i in items],
            versions=[i.held.version for i in items],
            ms=ms,
            token=token,
            credits=credits,
        )
        self._sent[token] = _Frame(kind, items)
        if not self._send(pb.ConsumeRequest(settle=frame)):
            self._credits += credits
            del self._sent[token]
            self._finish(kind, items, [BrokerUnavailable("consumer is not connected")] * len(items))

    # -- answers --------------------------------------------------------------

    def answered(self, result: pb.SettleResult) -> None:
        """The broker's answer to one frame."""
        frame = self._sent.pop(result.token, None)
        if frame is None:
            return
        refused = {r.index: error_for(status_code(r.code), r.reason) for r in result.rejections}
        outcomes: list[DejaqError | None] = []
        for n, item in enumerate(frame.items):
            error = refused.get(n)
            if error is None and n < len(result.versions):
                item.held.version = result.versions[n]
            outcomes.append(error)
        self._finish(frame.kind, frame.items, outcomes)

    def lost(self, error: DejaqError) -> None:
        """The stream broke: frames sent on it may or may not have been applied."""
        sent, self._sent = self._sent, {}
        for frame in sent.values():
            self._finish(frame.kind, frame.items, [error] * len(frame.items))

    def abandon(self, error: DejaqError) -> None:
        """The consumer is gone for good: fail what is queued and what is sent."""
        self.lost(error)
        pending, self._pending = self._pending, {}
        for (kind, _), items in pending.items():
            self._finish(kind, items, [error] * len(items))

    def _finish(self, kind: int, items: list[_Item], outcomes: list[DejaqError | None]) -> None:
        for item, error in zip(items, outcomes, strict=True):
            if item.receipt is not None:
                if item.receipt.done():
                    pass
                elif error is None:
                    item.receipt.set_result(None)
                else:
                    item.receipt.set_exception(error)
            elif error is not None:
                self._report(SettleFailure(item.held.id, KIND_NAMES.get(kind, "?"), error))
        self._count(-len(items))

    def _report(self, failure: SettleFailure) -> None:
        self._failures.append(failure)
        if self.on_error is not None:
            try:
                self.on_error(failure)
            except Exception:
                log.exception("on_settle_error callback failed")
        else:
            log.warning("%s of %s refused: %s", failure.kind, failure.id, failure.error)

    def _count(self, delta: int) -> None:
        self._unanswered += delta
        if self._unanswered < self.max_unanswered:
            self._room.set()
        else:
            self._room.clear()
        if self._unanswered == 0:
            self._answered.set()
        else:
            self._answered.clear()

    # -- flushing -------------------------------------------------------------

    async def flush(self, timeout_s: float | None = None) -> None:
        """Send what is queued, wait for every answer, raise what was refused."""
        self.send_now()
        if self._unanswered:
            await asyncio.wait_for(self._answered.wait(), timeout_s)
        self.raise_failures()

    def raise_failures(self) -> None:
        failures, self._failures = self._failures, []
        if failures:
            raise SettleRejected(failures)

    def take_failures(self) -> list[SettleFailure]:
        failures, self._failures = self._failures, []
        return failures
