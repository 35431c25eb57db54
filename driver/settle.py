"""Settle grouping: acks, nacks and extends leave in frames, never one by one.

A settle is queued and the caller goes on. Queued settles leave together
``linger_ms`` after the first of them (50 ms by default; Pulsar groups acks
for 100 ms), at once when ``max_batch`` ids of one kind have gathered or when a
caller waits for confirmation, as one Settle frame per kind, with the credits
the consumer returns riding along. So a consumer sends a bounded number of
frames per second however many messages it settles. The broker answers each
frame with one SettleResult: the refusals, and for extends the new versions.

Confirmation is the caller's choice, as with Pulsar's ack receipts or Kafka's
``commitAsync`` / ``commitSync``:

- ``confirm=False`` (the default for ack and nack): the call returns once the
  settle is queued. A refusal (stale version, lease lost to another consumer)
  goes to ``on_error`` (by default a warning in the log) and is kept for the
  next ``flush()``, which raises it as ``SettleRejected``.
- ``confirm=True``: the frame leaves at the end of this event-loop turn; the
  call waits for the broker's answer and raises the refusal itself (extend
  always confirms: the next settle needs the version it produced).
- ``flush()`` sends what is queued and waits until every settle sent so far is
  answered; the consumer's ``close()`` flushes before saying goodbye.

A settle whose frame was lost with its stream is reported as failed with
``BrokerUnavailable``: it may or may not have been applied. A consumer that
dies loses at most its unsent settles: those messages are redelivered when
their lease runs out, so nothing is ever lost (at-least-once).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from dejaq.core.errors import BrokerUnavailable, DejaqError
from dejaq.core.wire.status import error_for, status_code
from dejaq.driver import tracing
from dejaq.proto import dejaq_pb2 as pb

log = logging.getLogger(__name__)

ACK: int = pb.Settle.ACK
EXTEND: int = pb.Settle.EXTEND  # read once: an enum of a message class is a slow lookup
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


class _Group:
    """Settles of one (kind, ms), as columns: the ids and versions the frame
    quotes, and the deliveries behind them where there is one (an extend updates
    its version; a traced one links its span). A batch's ``ack_all`` adds its
    columns with no delivery at all."""

    __slots__ = ("helds", "ids", "receipts", "span", "versions")

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.versions: list[int] = []
        self.helds: list[Held] = []  # of an extend, one per id
        self.receipts: dict[int, asyncio.Future[None]] = {}  # index -> a waiting caller
        self.span: Any = None  # its frame's settle span, while traced

    def __len__(self) -> int:
        return len(self.ids)


class SettleBatcher:
    """Queues settles and credits, sends them grouped, matches the answers."""

    def __init__(
        self,
        send: Send,
        *,
        max_batch: int = 1000,
        linger_ms: float = 50.0,
        max_unanswered: int = 20_000,
        on_error: OnError | None = None,
        trace: tracing.SettleTrace | None = None,
    ) -> None:
        self._send = send
        self._trace = trace
        self.max_batch = max_batch
        self.linger_s = linger_ms / 1000
        self.max_unanswered = max_unanswered
        self.on_error = on_error
        self._pending: dict[tuple[int, int], _Group] = {}
        # The plain acks' group of ``_pending`` once made (None: not yet): an ack
        # a message appends to it with no key made and looked up.
        self._acks: _Group | None = None
        self._credits = 0
        self._credit_urge = 1 << 62  # credits that make a frame leave this turn
        self._soon: asyncio.Handle | None = None
        self._later: asyncio.TimerHandle | None = None
        self._tokens = itertools.count(1)
        self._last_token = 0
        self._sent: dict[int, tuple[int, _Group]] = {}  # token -> (kind, group)
        self._unanswered = 0  # ids queued or sent, not yet answered
        self._room: list[asyncio.Future[None]] = []  # callers held by back-pressure
        self._flushes: list[tuple[int, asyncio.Future[None]]] = []  # (token, waiter)
        self._failures: list[SettleFailure] = []
        # While the consumer reconnects, queued settles wait for the new stream.
        self.holding = False

    # -- queueing -------------------------------------------------------------

    @property
    def crowded(self) -> bool:
        """Whether a settle must wait for answers before it is queued (back-pressure)."""
        return self._unanswered >= self.max_unanswered

    async def settle(self, kind: int, held: Held, ms: int, confirm: bool) -> None:
        """Queue one settle; with ``confirm`` wait for the broker's answer."""
        if self._unanswered >= self.max_unanswered:
            await self.room()
        if not confirm:
            self.add(kind, held, ms, getattr(held, "_process", None) is not None)
            return
        group = self._group(kind, ms)
        group.ids.append(held.id)
        group.versions.append(held.version)
        group.helds.append(held)
        self._unanswered += 1
        receipt = asyncio.get_running_loop().create_future()
        group.receipts[len(group.ids) - 1] = receipt
        self._send_soon()
        await receipt

    def add(self, kind: int, held: Held, ms: int, traced: bool = False) -> bool:
        """Queue one unconfirmed settle at once, unless settles must wait for
        room (``crowded``: False, nothing queued). An ack or nack is an append to
        its group's columns; ``traced``: ``held`` has a span its frame's span
        links to."""
        if self._unanswered >= self.max_unanswered:
            return False
        if kind == ACK and not ms:
            group = self._acks
            if group is None:
                group = self._acks = self._group(ACK, 0)
        else:
            group = self._group(kind, ms)
        ids = group.ids
        ids.append(held.id)
        group.versions.append(held.version)
        if traced or kind == EXTEND:
            group.helds.append(held)
        self._unanswered += 1
        if len(ids) >= self.max_batch:
            self.send_now()
        elif self._later is None:
            self._later = asyncio.get_running_loop().call_later(self.linger_s, self.send_now)
        return True

    def add_columns(self, kind: int, ids: list[str], versions: list[int], ms: int) -> None:
        """Queue unconfirmed acks or nacks of a batch's messages by their columns."""
        group = self._group(kind, ms)
        group.ids += ids
        group.versions += versions
        self._unanswered += len(ids)
        self._queued(group)

    def _group(self, kind: int, ms: int) -> _Group:
        group = self._pending.get((kind, ms))
        if group is None:
            group = self._pending[(kind, ms)] = _Group()
        return group

    def _queued(self, group: _Group) -> None:
        if len(group.ids) >= self.max_batch:
            self.send_now()
        elif self._later is None:
            self._later = asyncio.get_running_loop().call_later(self.linger_s, self.send_now)

    def credit(self, n: int) -> None:
        """Return ``n`` credits: they ride with the next settle frame, and leave
        this turn once a quarter of the window (see ``set_window``) has gathered."""
        self._credits += n
        if self._credits >= self._credit_urge:
            self._send_soon()
        elif self._later is None:
            self._later = asyncio.get_running_loop().call_later(self.linger_s, self.send_now)

    def set_window(self, window: int) -> None:
        """Credits are urgent once a quarter of the consumer's window waits to go back."""
        self._credit_urge = max(1, window // 4)

    def forget_credits(self) -> None:
        """A new stream's Hello states the whole window: credits not yet sent are moot."""
        self._credits = 0

    def _send_soon(self) -> None:
        if self._soon is None:
            self._soon = asyncio.get_running_loop().call_soon(self.send_now)

    def send_now(self) -> None:
        """Send everything queued: one frame per (kind, ms) group, credits on the first."""
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None
        if self._later is not None:
            self._later.cancel()
            self._later = None
        if self.holding:
            return
        pending, self._pending, self._acks = self._pending, {}, None
        for (kind, ms), group in pending.items():
            if len(group.ids) <= self.max_batch:
                self._send_frame(kind, ms, group)
                continue
            for start in range(0, len(group.ids), self.max_batch):
                part = _Group()
                end = start + self.max_batch
                part.ids = group.ids[start:end]
                part.versions = group.versions[start:end]
                # An extend's deliveries line up with its ids; others' only link spans.
                aligned = kind == EXTEND
                part.helds = group.helds[start:end] if aligned or not start else []
                part.receipts = {
                    i - start: r
                    for i, r in group.receipts.items()
                    if start <= i < start + self.max_batch
                }
                self._send_frame(kind, ms, part)
        if self._credits:
            credits, self._credits = self._credits, 0
            if not self._send(pb.ConsumeRequest(credits=credits)):
                self._credits += credits  # returned when connected again

    def _send_frame(self, kind: int, ms: int, group: _Group) -> None:
        token = next(self._tokens)
        credits, self._credits = self._credits, 0
        frame = pb.Settle(
            kind=kind,  # type: ignore[arg-type]
            ids=group.ids,
            versions=group.versions,
            ms=ms,
            token=token,
            credits=credits,
        )
        if self._trace is not None:
            group.span = self._trace.started(
                KIND_NAMES.get(kind, "?"), len(group), map(tracing.span_of, group.helds)
            )
        if self._send(pb.ConsumeRequest(settle=frame)):
            self._sent[token] = (kind, group)
            self._last_token = token
        else:
            self._credits += credits
            self._finish(kind, group, {}, BrokerUnavailable("consumer is not connected"))

    # -- answers --------------------------------------------------------------

    def answered(self, result: pb.SettleResult) -> None:
        """The broker's answer to one frame."""
        entry = self._sent.pop(result.token, None)
        if entry is None:
            return
        kind, group = entry
        refused = {
            r.index: error_for(status_code(r.code), r.reason, r.kind) for r in result.rejections
        }
        if kind == EXTEND:
            for n, version in enumerate(result.versions):
                if n not in refused:
                    group.helds[n].version = version
        self._finish(kind, group, refused, None)

    def lost(self, error: DejaqError) -> None:
        """The stream broke: frames sent on it may or may not have been applied."""
        sent, self._sent = self._sent, {}
        for kind, group in sent.values():
            self._finish(kind, group, {}, error)

    def abandon(self, error: DejaqError) -> None:
        """The consumer is gone for good: fail what is queued and what is sent."""
        self.lost(error)
        pending, self._pending, self._acks = self._pending, {}, None
        for (kind, _), group in pending.items():
            self._finish(kind, group, {}, error)

    def _finish(
        self,
        kind: int,
        group: _Group,
        refused: dict[int, DejaqError],
        all_failed: DejaqError | None,
    ) -> None:
        """Settle the receipts of a group: ``refused`` by index, or all with ``all_failed``."""
        receipts = group.receipts
        if group.span is not None:
            tracing.settle_ended(group.span, all_failed, len(refused))
            group.span = None
        if all_failed is not None:
            refused = dict.fromkeys(range(len(group)), all_failed)
        for n, receipt in receipts.items():
            if receipt.done():
                continue
            error = refused.get(n)
            if error is None:
                receipt.set_result(None)
            else:
                receipt.set_exception(error)
        for n, error in refused.items():
            if n not in receipts:
                self._report(SettleFailure(group.ids[n], KIND_NAMES.get(kind, "?"), error))
        self._unanswered -= len(group)
        self._wake()

    def _report(self, failure: SettleFailure) -> None:
        self._failures.append(failure)
        if self.on_error is not None:
            try:
                self.on_error(failure)
            except Exception:
                log.exception("on_settle_error callback failed")
        else:
            log.warning("%s of %s refused: %s", failure.kind, failure.id, failure.error)

    def _wake(self) -> None:
        if self._room and self._unanswered < self.max_unanswered:
            room, self._room = self._room, []
            for waiter in room:
                if not waiter.done():
                    waiter.set_result(None)
        if self._flushes:
            oldest = min(self._sent, default=self._last_token + 1)
            still: list[tuple[int, asyncio.Future[None]]] = []
            for token, waiter in self._flushes:
                if token < oldest:
                    if not waiter.done():
                        waiter.set_result(None)
                else:
                    still.append((token, waiter))
            self._flushes = still

    async def room(self) -> None:
        """Wait until settles may be queued again (see ``crowded``)."""
        while self._unanswered >= self.max_unanswered:
            await self._wait_for_room()

    async def _wait_for_room(self) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._room.append(waiter)
        await waiter

    # -- flushing -------------------------------------------------------------

    async def flush(self, timeout_s: float | None = None) -> None:
        """Send what is queued, wait for the answers to every settle made so far,
        and raise what was refused."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.holding and self._pending:  # reconnecting: wait for the new stream
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError("settles are waiting for a reconnect")
            await asyncio.sleep(0.02)
        self.send_now()
        if self._sent:
            waiter = asyncio.get_running_loop().create_future()
            self._flushes.append((self._last_token, waiter))
            self._wake()
            await asyncio.wait_for(waiter, timeout_s)
        self.raise_failures()

    def raise_failures(self) -> None:
        failures, self._failures = self._failures, []
        if failures:
            raise SettleRejected(failures)

    def take_failures(self) -> list[SettleFailure]:
        failures, self._failures = self._failures, []
        return failures
