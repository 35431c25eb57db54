"""The dispatcher: one per (topic, broker), pushing due messages to local consumers.

It never polls on a fixed tick. After a lease pass that found nothing due it asks
storage for the next due timestamp of its buckets and sleeps exactly until then;
after one that delivered it looks again soon (under steady load that is one
storage round trip a pass instead of two). A produce that lands earlier
(``hint``), new credit (``poke``) or a consumer joining wakes it sooner. A
bounded re-scan interval only catches what no hint announced (another broker's
produce, a clock jump).

Looking ahead (``lookahead_ms``, the broker's ``--lookahead-ms``): a pass takes
what is due up to ``lookahead_ms`` later, and the ``Window`` holds those
messages until their millisecond. A pass then runs every ``lookahead_ms / 2``
under steady load instead of every millisecond, and a storage call that is slow
for a few ms (a large insert ahead of it in Redis, a checkpoint) no longer makes
deliveries late: they were taken before they were due. With 0 a pass takes only
what is due now and runs at the next millisecond.

Sending ahead: a consumer that holds deliveries until due itself (its
``ahead_ms``, from ``Hello.hold_ms``: the driver's ``Consumer``) is leased what
becomes due within ``max(lookahead_ms, ahead_ms)`` and sent it at once, each
frame stamped with the broker's clock; the consumer releases each message when
that clock reaches its timestamp. A broker busy for a few ms (a large produce
frame, a slow storage call, a collection) then makes no delivery late, and
passes run every ``ahead_ms / 2`` with more in each. Passes are paced by the
shortest horizon among the dispatcher's consumers, so one that holds nothing
itself is still served at its millisecond.

A stall: when none of the dispatcher's consumers has had credit for one lease
(the longest of theirs) while messages of its buckets are due, they have
stopped taking deliveries, and alone on this broker they would starve their
buckets for good (in a cluster nobody else leases them). The dispatcher tells
``on_stall`` (the coordinator stops counting them for the bucket assignment, so
the buckets go to consumers elsewhere) and tells it again, with
``stalled=False``, as soon as one of them has credit again.

A receiver may ask for a look-ahead of its own (``lease_ahead_ms``): the
webhook poster does, so a pass leases a few ms of its messages in one storage
call and they are posted from the window at their millisecond, as the broker's
look-ahead would.

A receiver answered once (``answers_once``: an HTTP lease request, answered
with its first delivery and gone) is leased ahead only its first message and
what shares its millisecond, and while it holds those only messages stored
since (hinted: a produce, a nack, a hand-back) due before them: anything more
would go back to storage when it is answered, and meanwhile be kept from the
other receivers, which then wait with credit while messages come due. With
several waiting, each holds the next message in turn.
A pass that served only such receivers, each holding its answer, plans no next
pass: a produce (its hint), a hand-back or a new receiver brings one.

Fairness: each pass walks the consumers that have credit, starting one further
along each time (round-robin), and leases to each at most its credit (held
messages count against it). A slow consumer is never sent more than its window;
an idle one is served on every pass. Storage decides what is due by the pass's
bound and the window releases nothing before its timestamp, both by the one
clock, so nothing is ever early.

A topic with a rate cap (``max_rate``) leases no more a pass than its
``RateCap`` allows, and while a backlog waits on the cap the next pass runs when
the next token is in. It looks and sends nothing ahead: a lease spends tokens,
and what it took ahead would go out at its millisecond on top of what that
millisecond's tokens allow. Deliveries made while the cap holds a backlog back are
observed as rate-limited lateness, apart from the broker's own.

Limits per key (``key_concurrency``, ``key_rate``: ``key_limiter.py``): each
lease call carries the caps that keep every key within this broker's share of
its limits, counted from the leases it grants down through settles, hand-backs
and lease expiry; what a pass took over a key's allowance (a key storage was
not yet told of) is handed back at once. While a key waits at its limit the
next pass runs at its next token, or after ``KEY_WAIT_MS`` (a settle pokes
sooner): storage's next due time is then that key's backlog, no guide to the
others'. A topic with a rate per key, like one with a rate cap, looks and
sends nothing ahead, so a key's tokens are spent at its deliveries' time.

A paused topic (``pausing.py``) runs no pass and sends nothing: what the
window held is handed back to storage (due at its own time again, its credit
returned), so nothing leaves ahead either. Leases already out may be settled. A
resume pokes the dispatcher, whose next pass delivers the backlog in due order.

A priority topic (core/priority.py) keeps its available messages at their
rank, a negative timestamp: always due, most urgent first. A pass first
promotes what became available in its buckets (a not-before time or nack
delay come, a lease run out) to its rank, then leases with no look-ahead, so
the most urgent goes first whatever arrived when. Its next pass is due at the
earliest timestamp >= 0 of its buckets (the next message to become
available); a rank found there means "at once". What it observes is the wait
from available to delivery, not lateness: a ranked message is never early.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from dejaq.broker.dispatch import pausing, ranks
from dejaq.broker.dispatch.key_limiter import ConcurrencyShare, KeyLimiter
from dejaq.broker.dispatch.rate import RateCap
from dejaq.broker.dispatch.window import Window
from dejaq.broker.observability import tracing
from dejaq.broker.observability.metrics import Event, Metrics
from dejaq.broker.observability.tracing import BrokerTracing
from dejaq.core.buckets import Buckets, bucket_of
from dejaq.core.clock import Clock, Wake, WallClock
from dejaq.core.deliveries import columns
from dejaq.core.errors import DejaqError, NotFound, StorageError
from dejaq.core.model import LeasedMessage, Leases, NewMessage, Topic
from dejaq.storage_plugins.base import LeaseRequest, Storage

if TYPE_CHECKING:
    from opentelemetry.trace import Span

log = logging.getLogger(__name__)


class _Pass(enum.Enum):
    MORE = "more"  # every consumer's batch filled up: more may be due
    DRAINED = "drained"  # everything due now was leased, nothing was due
    DRAINED_SOME = "drained some"  # everything due now was leased, and something was
    NO_CREDIT = "no credit"
    NO_BUCKETS = "no buckets"  # our consumers own no bucket (cluster): wait for a rebalance
    THROTTLED = "throttled"  # the topic's rate cap allowed no more: more may be due
    PAUSED = "paused"  # the topic was paused during the pass: the next step hands back
    # Every receiver served is answered once and holds what it is answered with:
    # a produce (hint), a hand-back or a new receiver (poke) brings the next pass.
    ANSWERS_HELD = "answers held"


STORAGE_RETRY_MS = 500
# While a key waits at its limit, the longest until the next pass (a settle pokes sooner).
KEY_WAIT_MS = 5
# Messages a pass of a priority topic ranks at most; with more to rank it leases
# nothing and looks again at once, so none is leased out of priority order.
PROMOTE_LIMIT = 4096
_NEVER = 1 << 62


class Receiver(Protocol):
    """What the dispatcher needs of a consumer session."""

    consumer_id: str
    lease_ms: int
    credit: int
    ahead_ms: int  # how early it may be sent a message (it holds each until due)
    lease_ahead_ms: int  # how early it may be leased one, held here until due
    # Answered with its first delivery, then gone (an HTTP lease request):
    # leased ahead only what comes due with that first one.
    answers_once: bool

    def deliver(self, leases: Leases) -> None: ...
    def fail(self, exc: Exception) -> None: ...


OnStall = Callable[[list[str], bool], None]  # (consumer ids, stalled or not)


class Dispatcher:
    def __init__(
        self,
        topic: Topic,
        storage: Storage,
        buckets: Callable[[], Buckets],
        max_frame: int,
        rescan_ms: int,
        metrics: Metrics | None = None,
        clock: Clock | None = None,
        lookahead_ms: int = 0,
        on_stall: OnStall | None = None,
        tracing: BrokerTracing | None = None,
        key_share: ConcurrencyShare | None = None,
    ) -> None:
        self.topic = topic
        self._tracing = tracing
        self._storage = storage
        self._buckets = buckets
        self._max_frame = max_frame
        self._rescan_ms = rescan_ms
        self._metrics = metrics
        self._clock: Clock = clock or WallClock()
        self._receivers: list[Receiver] = []
        # A priority topic leases with no look-ahead: a rank is due at once, and
        # what is sent must be the most urgent at the time it is sent.
        self._ranked = ranks.is_priority(topic)
        self._lookahead = 0 if self._ranked else lookahead_ms
        self._turn = 0
        self._wake = Wake()
        self._window: Window[Receiver] = Window(self._ahead)
        # When the next pass runs: a hint that needs one sooner wakes the
        # dispatcher. _NEVER during a pass (any hint makes it look again) and
        # while no consumer has credit, when hints are off (only credit helps).
        self._pass_at = 0
        self._hints = True
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._last_pass_ms = 0  # the "now" of the latest lease pass
        self._on_stall = on_stall
        self._no_credit_since: int | None = None  # no consumer here has had credit since
        self._stalled: list[str] = []  # consumers reported stalled to on_stall
        self._cap: RateCap | None = None
        self._share = 1.0  # of the topic's buckets this broker serves (for the cap)
        self._throttled = False  # the cap holds back a backlog
        self._paused = False
        # This broker's whole share of a concurrency limit per key (all of it alone).
        self._key_share: ConcurrencyShare = key_share or (lambda n: n)
        self._keys: KeyLimiter | None = None
        # Of receivers answered once, the due time of the first message each holds.
        self._first_due: dict[Receiver, int] = {}
        self._hinted = _NEVER  # the earliest message stored (hinted) since the last pass began
        self.retune(topic)

    @property
    def receivers(self) -> list[Receiver]:
        return list(self._receivers)

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"dispatch:{self.topic.name}")

    async def stop(self) -> None:
        # The flag and the wake too, not the cancel alone: a storage client
        # that swallows the CancelledError (seen with redis-py mid-call) left
        # the loop asleep for good, and the broker's stop waiting on it.
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def add(self, receiver: Receiver) -> None:
        self._receivers.append(receiver)
        self.poke()

    def remove(self, receiver: Receiver) -> list[LeasedMessage]:
        """Stop sending to ``receiver``; the messages held for it, never sent (give
        them to ``hand_back``: they are still leased to it)."""
        with contextlib.suppress(ValueError):
            self._receivers.remove(receiver)
        self._first_due.pop(receiver, None)
        return self._window.forget(receiver)

    async def hand_back(self, owner: str, held: Sequence[LeasedMessage]) -> None:
        """Put messages taken ahead for a consumer that left back on the timeline at
        their own time. An at-most-once one was deleted as it was taken: stored again.
        On a storage error the leases stay and expire: redelivered late, not lost."""
        if not held:
            return
        await self._give_back(owner, held)
        self.hint(min(m.timestamp for m in held))
        log.info("%s: handed back %d messages held for %s", self.topic.name, len(held), owner)

    async def _give_back(self, owner: str, held: Sequence[LeasedMessage]) -> bool:
        """Put leased messages never sent back on the timeline (see ``hand_back``);
        False when storage failed (their leases run out instead)."""
        name = self.topic.name
        if self._keys is not None:
            self._keys.held.released(m.id for m in held)
        try:
            items = [(m.id, m.version, m.timestamp) for m in held]
            outcomes = await self._storage.hand_back(name, items, owner)
            gone = [m for m, o in zip(held, outcomes, strict=True) if isinstance(o, NotFound)]
            if gone:
                buckets = self.topic.settings.buckets
                again = [
                    NewMessage(
                        m.id,
                        m.timestamp,
                        m.payload,
                        bucket_of(m.id, buckets),
                        1,
                        0,
                        m.priority,
                        m.key,
                        m.headers,
                    )
                    for m in gone
                ]
                # Its delete left a tombstone: the id must be free to store it again.
                await self._storage.forget_tombstones(name, [m.id for m in gone])
                await self._storage.insert(name, again)
        except DejaqError as exc:
            log.warning("%s: could not hand back %d held messages: %s", name, len(held), exc)
            return False
        return True

    def settled(self, ids: list[str], until: int | None) -> None:
        """Leases of ``ids`` were settled here: released (ack, nack), or extended to
        ``until``. A release may let a key at its limit lease again."""
        if self._keys is None:
            return
        if until is None:
            self._keys.held.released(ids)
            self.poke()
        else:
            self._keys.held.extended(ids, until)

    def retune(self, topic: Topic) -> None:
        """The topic's settings changed (its rate cap, a pause or a resume)."""
        self.topic = topic
        self._paused = topic.settings.paused
        rate = topic.settings.max_rate
        if not rate:
            self._cap = None
            self._throttled = False
        elif self._cap is None:
            self._cap = RateCap(rate, self._clock.now_ms())
        else:
            self._cap.rate = rate
        # Limits per key (none on a priority topic, leased by rank alone).
        if self._keys is not None:
            self._keys.retune(topic.settings)
        elif not self._ranked:
            self._keys = KeyLimiter(topic.settings, self._clock.now_ms())
        if self._keys is not None and not self._keys.active:
            self._keys = None
        self.poke()

    def poke(self) -> None:
        """Look again now (new credit, a new consumer)."""
        self._wake.set()

    def hint(self, timestamp: int) -> None:
        """A message due at ``timestamp`` was stored: wake if it needs a pass sooner
        than planned (one look-ahead before it is due)."""
        self._hinted = min(self._hinted, timestamp)
        if self._hints and timestamp - self._cadence() < self._pass_at:
            self._wake.set()

    @property
    def _rated(self) -> bool:
        """Under a rate cap or a rate per key, whose tokens a lease spends (taken
        ahead, a message would go out at its millisecond together with those
        the tokens of that time allow)."""
        return self._cap is not None or (self._keys is not None and self._keys.rated)

    def _looks_ahead(self) -> int:
        """The broker's own look-ahead for this topic: none when rated."""
        return 0 if self._rated else self._lookahead

    def _ahead(self, r: Receiver) -> int:
        """How early ``r`` may be sent a message (never on a priority topic, nor
        under a rate cap, as above)."""
        return 0 if self._ranked or self._rated else r.ahead_ms

    def _horizon(self, r: Receiver) -> int:
        """How far ahead a pass leases for ``r`` (its own look-ahead counts only
        where the broker's may look ahead at all: not under a rate cap, nor on a
        priority topic)."""
        own = 0 if self._ranked or self._rated else r.lease_ahead_ms
        return max(self._looks_ahead(), self._ahead(r), own)

    def _cadence(self) -> int:
        """The look-ahead that paces passes: the shortest of the consumers'."""
        return min(map(self._horizon, self._receivers), default=self._looks_ahead())

    async def _run(self) -> None:
        while not self._stopping:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except NotFound as exc:  # the topic was deleted under us
                log.info("topic %s is gone; closing its consumers", self.topic.name)
                for r in self.receivers:
                    r.fail(exc)
                return
            except StorageError as exc:
                log.warning("dispatch %s: storage error, retrying: %s", self.topic.name, exc)
                self._pass_at = self._clock.now_ms() + STORAGE_RETRY_MS
            except Exception:
                log.exception("dispatch %s: unexpected error, retrying", self.topic.name)
                self._pass_at = self._clock.now_ms() + STORAGE_RETRY_MS
            await self._sleep()

    async def _step(self) -> None:
        """Send what the window holds that is due; run a pass when one is due."""
        if self._paused:
            await self._pause()
            return
        self._send_held()
        if self._wake.is_set() or self._clock.now_ms() >= self._pass_at:
            outcome = await self._pass()
            if outcome is _Pass.DRAINED_SOME:
                await asyncio.sleep(0)  # the streams write what it sent before it goes on
            self._pass_at = await self._after(outcome)
            self._send_held()

    async def _pause(self) -> None:
        """Paused: hand back what the window holds, and wait for a resume (its
        retune pokes). Credit the held messages took is given back."""
        self._wake.clear()
        self._pass_at, self._hints = _NEVER, False
        self._first_due.clear()
        for r in list(self._window.receivers()):
            held = self._window.forget(r)
            r.credit += len(held)
            await self.hand_back(r.consumer_id, held)

    async def _after(self, outcome: _Pass) -> int:
        """When to run the next pass."""
        if outcome is _Pass.MORE:
            return self._last_pass_ms  # at once (after letting acks and produces in)
        if outcome is _Pass.THROTTLED:
            assert self._cap is not None
            return self._cap.next_ms(self._share)
        if outcome is _Pass.NO_CREDIT:
            return await self._stall_check()
        if outcome is _Pass.PAUSED:
            return _NEVER  # the retune that paused it poked: the next step hands back
        if outcome is _Pass.ANSWERS_HELD:
            return _NEVER  # hints stay on: a message due sooner wakes it
        if outcome in (_Pass.DRAINED, _Pass.DRAINED_SOME) and self._key_waits():
            assert self._keys is not None
            due = await self._storage.next_due(self.topic.name, self._buckets())
            if due is not None and due <= self._last_pass_ms:
                token = self._keys.next_token_ms()
                wait = self._last_pass_ms + KEY_WAIT_MS
                return max(self._last_pass_ms + 1, wait if token is None else min(token, wait))
            self._keys.unblock()  # nothing is due here now: no key waits
        if outcome is _Pass.NO_BUCKETS:
            # Hints cannot help, only new credit, a consumer or a rebalance (each pokes).
            self._hints = False
            return _NEVER
        if outcome is _Pass.DRAINED_SOME and not self._ranked:
            # Under steady load more becomes due: look again, without asking storage
            # first (one round trip a pass, not two). A pass that finds nothing
            # asks next_due, as below. (On a priority topic what arrives is ranked
            # at once and hinted: nothing "becomes due" but by next_due's times.)
            return self._last_pass_ms + max(1, self._cadence() // 2)
        due = await self._storage.next_due(self.topic.name, self._buckets())
        rescan = self._clock.now_ms() + self._rescan_ms
        if due is None:
            return rescan
        return min(max(due - self._cadence(), self._last_pass_ms + 1), rescan)

    def _key_waits(self) -> bool:
        """A key waits at its limit (its backlog is what storage calls next due)."""
        return self._keys is not None and self._keys.blocked()

    async def _stall_check(self) -> int:
        """No consumer here has credit: when the next pass is due. Past one lease
        of it, with messages of our buckets due, report the consumers stalled."""
        self._hints = False  # only credit, a consumer or a rebalance helps (each pokes)
        if self._on_stall is None or self._stalled or not self._receivers:
            return _NEVER
        now = self._clock.now_ms()
        if self._no_credit_since is None:
            self._no_credit_since = now
        at = self._no_credit_since + max(r.lease_ms for r in self._receivers)
        if now < at:
            return at
        buckets = self._buckets()
        if buckets is not None and not buckets:
            return _NEVER  # they own nothing: nothing is starved
        due = await self._storage.next_due(self.topic.name, buckets)
        if due is None or due > now:
            # Nothing waits for them yet: look again when it does (or a re-scan later).
            return min(due if due is not None else _NEVER, now + self._rescan_ms)
        self._stalled = [r.consumer_id for r in self._receivers]
        log.warning(
            "%s: consumers %s took no delivery for a lease while messages of their"
            " buckets are due: their buckets go to other consumers until they do",
            self.topic.name,
            self._stalled,
        )
        self._on_stall(self._stalled, True)
        return _NEVER

    async def _pass(self) -> _Pass:
        """Lease due messages (and what the look-ahead reaches) to the consumers with credit."""
        self._pass_at, self._hints = _NEVER, True  # any hint now means "look again"
        hinted, self._hinted = self._hinted, _NEVER
        self._wake.clear()
        ready = [r for r in self._rotated() if r.credit > 0]
        if not ready:
            return _Pass.NO_CREDIT
        self._no_credit_since = None
        if self._stalled:
            stalled, self._stalled = self._stalled, []
            log.info("%s: consumers %s take deliveries again", self.topic.name, stalled)
            assert self._on_stall is not None
            self._on_stall(stalled, False)
        now = self._last_pass_ms = self._clock.now_ms()
        buckets = self._buckets()
        if buckets is not None and not buckets:
            return _Pass.NO_BUCKETS  # no storage call: a rebalance pokes us
        allowed = self._allowed(now, buckets)
        if self._keys is not None:
            share = 1.0 if buckets is None else len(buckets) / self.topic.settings.buckets
            self._keys.begin(now, share, self._key_share)
        if allowed == 0:
            self._throttled = True
            return _Pass.THROTTLED
        if self._ranked:
            promoted = await self._storage.promote(self.topic.name, buckets, now, PROMOTE_LIMIT)
            if promoted >= PROMOTE_LIMIT:
                return _Pass.MORE  # rank them all before any is leased
        delivered = 0
        once = others = False  # receivers answered once were served; others were
        for n, r in enumerate(ready):
            if n:
                # One consumer's lease and frame a turn of the loop: a memory
                # lease does not pause, and three full frames at once (~50 ms)
                # held back every other topic's pass, ack and produce.
                await asyncio.sleep(0)
            if self._paused:
                return _Pass.PAUSED  # paused while we awaited storage
            if r not in self._receivers:
                continue  # left while we awaited storage
            horizon = self._horizon(r)
            if r.answers_once and horizon > 0:
                # Unrated, so uncapped: its first message (and what shares its
                # millisecond), then only what comes due before that.
                got, dead, drained = await self._first_answer(r, now, buckets, horizon, hinted)
                delivered += got
                if drained:  # nothing within the horizon
                    self._throttled = False
                    return _Pass.DRAINED_SOME if delivered or dead else _Pass.DRAINED
                once = True
                continue
            limit = min(r.credit, self._max_frame)
            capped = allowed is not None and allowed - delivered <= limit
            if capped:
                assert allowed is not None
                limit = allowed - delivered
            got, taken, dead = await self._take(r, now, buckets, limit, horizon)
            delivered += got
            others = True
            if taken < limit:
                self._throttled = False  # everything due is out
                return _Pass.DRAINED_SOME if delivered or dead else _Pass.DRAINED
            if capped:
                self._throttled = True
                return _Pass.THROTTLED
        return _Pass.ANSWERS_HELD if once and not others else _Pass.MORE

    async def _first_answer(
        self, r: Receiver, now: int, buckets: Buckets, horizon: int, hinted: int
    ) -> tuple[int, int, bool]:
        """Lease for a receiver answered once: ahead, only the messages due at
        its first message's millisecond (it is answered with those; more taken
        ahead would only go back to storage, kept from the other receivers
        meanwhile); once it holds them, only what was stored since, due before
        them (``hinted``: the earliest stored since the last pass; what lay
        there before went to others). Returns how many it was given, the dead
        letters met, and whether nothing lay within ``horizon`` (drained)."""
        first = self._first_due.get(r)
        if first is not None and hinted > first:
            return 0, 0, False
        if first is None:
            got, taken, dead = await self._take(r, now, buckets, 1, horizon)
            if not taken:
                return got, dead, True
            first = self._first_due.get(r)
            if first is None:  # it went back over its key's limit, or r left
                return got, dead, False
        else:
            got, dead = 0, 0
        limit = min(r.credit, self._max_frame)
        if limit > 0:
            more, _, dead_now = await self._take(r, now, buckets, limit, max(0, first - now))
            got, dead = got + more, dead + dead_now
        return got, dead, False

    async def _take(
        self, r: Receiver, now: int, buckets: Buckets, limit: int, horizon: int
    ) -> tuple[int, int, int]:
        """One lease call for ``r``: its deliveries held in the window (what is
        due sent at once). Returns how many it was given, how many storage
        leased (before any went back over a key's limit) and the dead letters."""
        span = self._tracing.lease(self.topic.name) if self._tracing is not None else None
        leases = await self._lease(
            span,
            LeaseRequest.of(
                self.topic.name,
                buckets,
                now,
                limit,
                r.lease_ms,
                r.consumer_id,
                self.topic.settings.max_deliveries,
                horizon,
                None if self._keys is None else self._keys.caps(),
            ),
        )
        taken = len(leases.delivered)
        if self._metrics is not None:
            self._metrics.count(Event.DEAD_LETTERED, self.topic.name, leases.dead_lettered)
        if self._keys is not None:
            leases = await self._within_key_limits(r.consumer_id, leases)
        delivered = columns(leases.delivered)  # as storage gave them, or made so once
        if self._cap is not None:
            self._cap.spend(len(leases.delivered))
        if delivered:
            r.credit -= len(delivered)
            if r in self._receivers:
                if r.answers_once:
                    first = min(delivered.timestamps)
                    self._first_due[r] = min(first, self._first_due.get(r, first))
                self._window.hold(r, Leases(delivered, leases.lease_until))
                self._send_held()  # what is due now, in due order with what was held
        return len(delivered), taken, leases.dead_lettered

    async def _lease(self, span: Span | None, request: LeaseRequest) -> Leases:
        """One lease call, in ``span`` when this pass is traced."""
        if span is None:
            return await self._storage.lease(request)
        assert self._tracing is not None
        try:
            leases = await self._storage.lease(request)
        except BaseException as exc:
            tracing.failed(span, exc)
            span.end()
            raise
        delivered = columns(leases.delivered)  # made once: the pass reads these columns on
        heads = delivered.headers
        self._tracing.leased(span, heads if heads is not None else (), len(delivered))
        return Leases(delivered, leases.lease_until, leases.dead_lettered)

    async def _within_key_limits(self, owner: str, leases: Leases) -> Leases:
        """What a lease call took within its keys' limits (counted held); what is
        over them goes back to storage at once."""
        assert self._keys is not None
        kept, over = self._keys.trim(leases.delivered)
        self._keys.took(kept, leases.lease_until)
        if over:
            await self._give_back(owner, over)
        if not over:
            return leases
        return Leases(kept, leases.lease_until, leases.dead_lettered)

    def _allowed(self, now: int, buckets: Buckets) -> int | None:
        """Deliveries the rate cap allows this pass; None without a cap."""
        if self._cap is None:
            return None
        total = self.topic.settings.buckets
        self._share = 1.0 if buckets is None else len(buckets) / total
        return self._cap.allowed(now, self._share)

    def _send_held(self) -> None:
        if self._paused:
            return  # handed back by the next step, never sent
        for r, leases in self._window.due(self._clock.now_ms()):
            self._send(r, leases)

    def _send(self, r: Receiver, leases: Leases) -> None:
        if leases.delivered:
            r.deliver(leases)
            if self._keys is not None and self.topic.settings.max_deliveries == 1:
                # At most once: deleted as it was leased, held only until it leaves.
                self._keys.held.released(columns(leases.delivered).ids)
            if self._metrics is not None:
                # Observed once the stream has written them: not on their way.
                now = self._clock.now_ms()
                asyncio.get_running_loop().call_soon(self._observe, leases, now, self._throttled)

    def _observe(self, leases: Leases, now: int, throttled: bool) -> None:
        """Metrics of deliveries sent at ``now`` (``throttled``: while the
        topic's rate cap held a backlog back)."""
        assert self._metrics is not None
        delivered = columns(leases.delivered)
        n = len(delivered)
        due = np.array(delivered.timestamps, np.int64)
        again = sum(1 for d in delivered.deliveries if d > 1)
        if self._ranked:
            prios = np.array(delivered.priorities or [0] * n, np.int64)
            waited = ranks.waited_ms(self.topic, now, due, prios)
            self._metrics.delivered_by_priority(self.topic.name, waited, again)
            return
        # Sent ahead to a consumer that holds it until due: on time, as far as
        # the broker can tell (the consumer's release is its own).
        on_time = np.minimum(due, now)
        paused = pausing.paused_ms(self.topic.settings, on_time)
        self._metrics.delivered(self.topic.name, now, on_time, again, throttled, paused)

    def _rotated(self) -> list[Receiver]:
        rs = self._receivers
        if not rs:
            return []
        self._turn = (self._turn + 1) % len(rs)
        return rs[self._turn :] + rs[: self._turn]

    async def _sleep(self) -> None:
        """Until the next pass or the next held message is due, unless woken."""
        until = self._pass_at
        held = self._window.next_due()
        if held is not None and held < until:
            until = held
        if self._wake.is_set() or until <= self._clock.now_ms():
            await asyncio.sleep(0)  # let acks, produces and streams in between passes
        elif until >= _NEVER:
            await self._wake.wait()
        else:
            await self._clock.wait_until(until, self._wake)
