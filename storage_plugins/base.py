"""The storage interface every backend implements.

Contract (the conformance suite in tests/storage_plugins checks every point):

- **Time.** All timestamps are integer epoch milliseconds. Storage never reads
  a clock: the broker passes ``now``. "Due" means ``timestamp <= now``. A
  served backend tells its server's clock (``server_time_us``): brokers
  sharing it judge ``now`` by that one clock (broker/clock/storage_clock.py).
- **Metadata and payloads apart.** A message's metadata (id, timestamp, bucket,
  version, deliveries, lease owner) lives in a time-ordered index; its payload
  is stored separately and never rewritten by a mutation.
- **Versions.** A new message has version 1. Every mutation (lease, extend,
  nack, move, release, redrive) bumps it by one. Ack, cancel and an
  at-most-once delivery delete the message.
- **Atomicity.** Each call is atomic: ``lease`` marks every returned message as
  leased before any other call can see it, so two concurrent leasers never get
  the same message; a batch ``insert`` either stores its accepted messages or
  (on error) none; a mutation either applies fully or raises and changes nothing.
- **Lease pass.** ``lease`` takes the messages of the given buckets due by
  its ``bound`` (``now``, or a few ms later when the broker looks ahead), in
  timestamp order. For each one: if it has been delivered ``max_deliveries``
  times already, or its ``expires_at`` has passed by ``max(now, timestamp)``
  (when it will be delivered), it goes to the dead timeline at ``now``;
  otherwise ``deliveries`` is incremented and, when ``max_deliveries == 1``
  (at-most-once), it is deleted on delivery, else its timestamp becomes
  ``until`` (``bound + lease_ms``) with ``owner`` as lease owner.
- **Tombstones.** When a topic's ``dedup_window_ms`` is not 0, deleting a
  message (ack, cancel, an at-most-once delivery) leaves a tombstone (topic,
  id, deleted at ``now``; no payload) in the same atomic step, and ``insert``
  answers DUPLICATE for a tombstoned id, storing nothing. A tombstone lasts
  until ``purge_tombstones`` removes it (the broker's retention sweep, once it
  is older than the window): so an id stays taken for at least the window.
  ``forget_tombstones`` removes those of given ids at once.
  Purging a dead message, redriving, deleting the topic leave none (delete_topic
  removes the topic's tombstones too).
- **Errors.** A missing topic or message raises ``NotFound``; a stale version
  ``StaleVersion``; a settle by a consumer that does not hold the lease
  ``NotLeaseHolder``; a move or cancel of a message under a live lease
  ``Leased``; a backend that cannot be reached ``StorageUnavailable``. Batch
  settles (ack / extend / nack) return one outcome per item instead of raising,
  so one stale ack does not spoil the batch.
- **Scan.** ``scan`` pages through one bucket's messages, live and dead, by
  id (ascending): a message present for the whole scan is returned exactly
  once, whatever else changes meanwhile. A page may hold fewer than ``limit``
  messages (even none) before the bucket ends; only ``after_id is None`` ends it.
- **By due.** ``by_due`` pages through a topic's live messages (waiting,
  due, leased; never dead) in ``(timestamp, id)`` order, a leased one at its
  lease expiry, a priority topic's ranked ones at their (negative) rank: up
  to ``limit`` strictly after the cursor ``after`` (``(timestamp, id)``;
  None: from the first). A page shorter than ``limit`` ends the timeline. Each
  page reads the timeline as it is then: a message whose timestamp changes
  between two pages may show on both or on neither. Read at bounded cost
  from the time index (about ``limit`` entries a bucket), never every message
  of the topic (memory: one vectorised pass over its columns).
- **Priority topics** (``kind == "priority"``, core/priority.py) use the same
  index: an available message sits at its *rank*, a negative timestamp, so a
  lease pass takes the most urgent first. Every message stores its
  ``priority`` (0 on a timeline), returned by ``get``, ``scan``,
  ``list_dead`` and in each ``LeasedMessage``. ``promote`` moves the live
  messages of the given buckets with ``0 <= timestamp <= now`` (a not-before
  time or nack delay come, a lease run out) to ``rank(topic, priority,
  timestamp)``, oldest first, up to ``limit``, clearing the lease owner and
  bumping the version; dead messages and tombstones stay. ``move`` may change
  a message's priority with its timestamp. When a topic's oldest live
  timestamp is a rank, ``census`` adds its ``Head``: the priority of a
  message at that rank and the oldest live timestamp due by ``now`` that is
  not a rank.
- **Forecast.** ``forecast`` counts the *waiting* messages of a topic due in
  each of ``bins`` bins of ``step_ms`` from ``now``: bin ``i`` holds those
  with ``now + i * step_ms <= timestamp < now + (i + 1) * step_ms``. Waiting
  means live (not dead) and without a lease owner: a nacked or moved message
  counts at its new time; a leased message does not count at all (its lease
  expiry is when a redelivery would happen if its consumer failed, not new
  load). On a priority topic a message counts at the time it becomes
  available (its not-before time or nack delay); one already ranked is
  available now, before the first bin. Read from the time index at bounded
  cost (range counts, never a read of every message of the topic); exact when
  nothing changes during the call.
- **Keys and headers.** A message may carry a ``key`` (``""``: none;
  core/keys.py) and ``headers`` (opaque encoded bytes, ``b""``: none;
  core/headers.py; storage never reads them). Both are stored with the
  message, headers apart from the time index as payloads are, and returned by
  ``get``, ``scan``, ``list_dead``, ``by_due`` and in every ``LeasedMessage``.
  Neither ever changes: a move that replaces the payload, a nack, a death and
  a redrive keep both.
- **Fair lease passes.** A pass on a timeline shares its ``limit`` among the
  *keys* with messages due by its ``bound`` in its buckets, the messages
  without a key counting together as one key (``""``), max-min fair: each key
  takes up to an equal share, what a key leaves (it has fewer due) goes to the
  others, in rounds, until the limit is reached or nothing more is due. When
  there are more such keys than the limit, those whose earliest due message is
  earliest go first. Within a key, messages go in timestamp order. A key's
  share is the key's across the pass's buckets, not a share per bucket. A
  topic none of whose messages has a key leases exactly as before. Cost: a pass
  reads about ``limit`` entries plus one per key with due messages, never the
  whole backlog of a key (a million messages of one key due at one
  millisecond do not slow a pass). ``caps`` (key -> n) bounds how many
  messages of each named key the pass may take (0: none); keys it does not
  name are not bounded. The messages a pass returns are in timestamp order.
  On a priority topic keys are stored and returned, and a pass takes by rank
  as before (no sharing by key, no caps).
- **Busiest keys.** ``keys`` names up to ``limit`` keys of a topic (the
  messages without a key are not a key here) with the most messages due by
  ``now`` (live, timestamp ``<= now``, a lease run out included), most first,
  ties by key, each with that count, the earliest timestamp among them
  (``oldest``, 0 when none is due: how late the key runs) and how many of its
  messages are held under a live lease (owner set, timestamp ``> now``); keys
  with neither due nor held messages are left out. Read at a cost bounded by
  the topic's keys and due messages, never a scan of waiting messages.
- **Debounce.** ``insert`` with ``on_duplicate`` REPLACE or EXTEND
  (core.model.OnDuplicate) changes a *waiting* message of the same id, one
  live and not under a live lease at ``now`` (rules.on_duplicate), in the
  same atomic step as the rest of the batch: REPLACE gives it the new
  message's timestamp, payload, key, headers, priority, delivery limit and
  expiry; EXTEND its timestamp only. Either clears a run-out lease's owner,
  keeps its deliveries and moves its version on, and answers REPLACED or
  EXTENDED; its key's lane, the fair passes and the counts follow as for a
  move (a key that changes leaves its old lane). A message under a live lease
  is left alone and answers LEASED; a dead message or a tombstone answers
  DUPLICATE, as with KEEP; an id not there is inserted (ACCEPTED). Within one
  batch a repeated id is applied in order, so the last wins: each later one
  answers as it would after the one before (REPLACED / EXTENDED, or as the
  first when that one was refused), and the backend sees the id once. Nothing
  is ever early: a lease pass sees a message before or after the change,
  never between.
- **Dead messages** keep their payload; their timestamp is the time they died.
  ``redrive`` puts them back on the live timeline with ``deliveries = 0`` and
  no expiry (a re-driven message gets a fresh start).
"""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

from dejaq.core.buckets import Buckets
from dejaq.core.errors import DejaqError, InvalidArgument, NotFound
from dejaq.core.model import (
    Counts,
    InsertStatus,
    Leases,
    Message,
    NewMessage,
    OnDuplicate,
    Settled,
    Topic,
)

Outcome = Settled | DejaqError
SettleItem = tuple[str, int]  # (message id, expected version)
HandBack = tuple[str, int, int]  # (message id, expected version, due timestamp)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """One lease pass: up to ``limit`` due messages of ``buckets`` of ``topic``
    to ``owner`` for ``lease_ms``. Built once per pass; checked when built.

    ``buckets`` is normalised to a sorted tuple of distinct ints (None = every
    bucket of the topic), so backends never see a set, a range or duplicates.
    ``max_deliveries`` is the topic's setting (a message's own one wins).

    ``horizon_ms`` looks ahead: the pass takes messages due up to ``bound``
    (``now + horizon_ms``), the broker holding each until its millisecond. A
    message's fate (expired? out of deliveries?) is judged at the time it will
    be delivered, ``max(now, timestamp)``, and the lease runs to ``until``
    (``bound + lease_ms``), so it is never shorter than ``lease_ms`` from the
    delivery."""

    topic: str
    buckets: tuple[int, ...] | None
    now: int
    limit: int
    lease_ms: int
    owner: str
    max_deliveries: int = 0
    horizon_ms: int = 0
    # The most messages of each named key this pass may take (see the contract);
    # None: no key is bounded.
    caps: Mapping[str, int] | None = None

    def __post_init__(self) -> None:
        if self.limit <= 0 or self.lease_ms <= 0 or not self.owner:
            raise InvalidArgument("lease needs limit > 0, lease_ms > 0 and an owner")
        if self.horizon_ms < 0:
            raise InvalidArgument("a lease cannot look behind: horizon_ms >= 0")
        if self.caps is not None and any(n < 0 for n in self.caps.values()):
            raise InvalidArgument("a key's cap in a lease pass is 0 or more")

    @classmethod
    def of(
        cls,
        topic: str,
        buckets: Buckets,
        now: int,
        limit: int,
        lease_ms: int,
        owner: str,
        max_deliveries: int = 0,
        horizon_ms: int = 0,
        caps: Mapping[str, int] | None = None,
    ) -> LeaseRequest:
        normal = None if buckets is None else tuple(sorted({int(b) for b in buckets}))
        return cls(topic, normal, now, limit, lease_ms, owner, max_deliveries, horizon_ms, caps)

    def cap(self, key: str) -> int | None:
        """How many messages of ``key`` the pass may take (None: no bound)."""
        return None if self.caps is None else self.caps.get(key)

    @property
    def bound(self) -> int:
        """The latest due timestamp the pass takes."""
        return self.now + self.horizon_ms

    @property
    def until(self) -> int:
        """When the leases it grants run out."""
        return self.bound + self.lease_ms


class KeyLoad(NamedTuple):
    """One of a topic's busiest keys (``Storage.keys``): its messages due now,
    the earliest timestamp among them (0: none due) and its messages held under
    a live lease."""

    key: str
    due: int
    held: int
    oldest: int


# The most keys one ``keys`` call names.
MAX_KEYS_LISTED = 1000


class Head(NamedTuple):
    """A priority topic's head, when its oldest live timestamp is a rank: the
    ``priority`` of a live message at that rank (the next to go out; any one of
    them when aging levels several priorities at one rank), which tells when
    it became available (core.priority.available_at), and ``due``, the oldest
    live timestamp that is no rank yet is due by the census's ``now`` (a
    message available but not ranked yet, or a lease run out; None: none)."""

    priority: int
    due: int | None

    @classmethod
    def at(cls, priority: int, unranked: int | None, now: int) -> Head:
        """The head at ``now``, from the oldest live timestamp that is not a
        rank, due or not (None: none)."""
        return cls(priority, unranked if unranked is not None and unranked <= now else None)


@dataclass(frozen=True, slots=True)
class TopicCensus:
    """A topic's bucket count, counts by state and oldest live timestamp (None:
    empty); ``head`` when that timestamp is a rank (None otherwise, and always
    on a timeline)."""

    buckets: int
    counts: Counts
    oldest: int | None
    head: Head | None = None


class Forecast(NamedTuple):
    """A ``forecast`` request: ``bins`` bins of ``step_ms`` from ``now``."""

    now: int
    step_ms: int
    bins: int

    @property
    def end(self) -> int:
        """The first timestamp past the last bin."""
        return self.now + self.step_ms * self.bins

    def bin_of(self, timestamp: int) -> int:
        return (timestamp - self.now) // self.step_ms


# The most bins one forecast counts: its cost grows with them.
MAX_FORECAST_BINS = 1000


@dataclass(frozen=True, slots=True)
class ScanPage:
    """One page of ``Storage.scan``: messages ascending by id, and the id to
    continue after (None when the bucket has no more)."""

    messages: list[Message]
    after_id: str | None

    @classmethod
    def of(cls, ascending: Sequence[Message], limit: int) -> ScanPage:
        """The page from up to ``limit + 1`` messages ascending by id (one more
        than the page tells that the bucket goes on)."""
        if len(ascending) > limit:
            return cls(list(ascending[:limit]), ascending[limit - 1].id)
        return cls(list(ascending), None)


def last_wins(
    messages: Sequence[NewMessage], mode: OnDuplicate
) -> tuple[list[NewMessage], list[int]]:
    """A REPLACE or EXTEND batch with each id once, as applying it in order
    leaves it: a repeat replaces the message before it, or moves its timestamp
    (EXTEND). Also the position in the result of each message of the batch."""
    merged: list[NewMessage] = []
    at: dict[str, int] = {}
    first: list[int] = []
    for m in messages:
        i = at.get(m.id)
        if i is None:
            at[m.id] = i = len(merged)
            merged.append(m)
        elif mode is OnDuplicate.REPLACE:
            merged[i] = m
        else:
            merged[i] = merged[i]._replace(timestamp=m.timestamp)
        first.append(i)
    return merged, first


def repeated(
    statuses: Sequence[InsertStatus], first: Sequence[int], mode: OnDuplicate
) -> list[InsertStatus]:
    """The statuses of a batch ``last_wins`` merged: the first message of an id
    takes the stored one's status; a repeat changed what the one before left
    (REPLACED / EXTENDED), unless that was refused (then it is refused alike)."""
    done = InsertStatus.REPLACED if mode is OnDuplicate.REPLACE else InsertStatus.EXTENDED
    seen: set[int] = set()
    out: list[InsertStatus] = []
    for i in first:
        st = statuses[i]
        if i in seen and st in (
            InsertStatus.ACCEPTED,
            InsertStatus.REPLACED,
            InsertStatus.EXTENDED,
        ):
            st = done
        seen.add(i)
        out.append(st)
    return out


class Migration(NamedTuple):
    """What ``Storage.migrate`` did: the stored format version before (None: a
    new store) and after (None: the backend keeps no format), and how many
    messages it rewrote."""

    before: int | None
    after: int | None
    moved: int


class Storage(abc.ABC):
    """Base of every backend: public methods time each call (the ``on_operation``
    hook) and apply what every backend shares (``NotFound`` for a missing topic
    on ``get_topic`` and a missing message on ``get``, topics sorted by name, an
    empty insert skipped); backends implement the ``_primitives``. Input is
    validated before it reaches storage: by the broker, and by ``LeaseRequest``
    when it is built."""

    # The most messages the broker inserts in one call; 0: a produce frame in
    # one. A backend whose insert holds the broker's event loop for long (Redis
    # packs and parses in it, and its server runs the script) sets a bound, so
    # a large frame does not hold deliveries back for milliseconds.
    insert_chunk = 0
    # The broker's default look-ahead (``--lookahead-ms``) on this backend: a
    # backend a round trip away gains from leasing a little ahead (measured on
    # Redis: p99 8.1 -> 5.1 ms at 4k/s, 6k/s now held); memory answers in the
    # broker's own loop and gains nothing.
    lookahead_ms = 20
    # The broker's default send-ahead (``--send-ahead-ms``) on this backend: how
    # early a consumer that holds deliveries until due is sent them. It must
    # cover the broker's longest stall plus a slow lease call: 100 ms holds
    # memory at 40k/s, SQLite at 15k/s and Redis at 15k/s at p99 <= 10 ms.
    send_ahead_ms = 100
    # Topics the default census asks at once: a few concurrent round trips to a
    # server (well under a connection pool's size); memory, which answers in the
    # broker's loop, asks one at a time so each step between yields stays short.
    census_chunk = 8

    def __init__(self, url: str) -> None:
        self.url = url
        # Called after each timed operation with (name, seconds, succeeded);
        # the broker points it at its metrics.
        self.on_operation: Callable[[str, float, bool], None] | None = None

    async def _timed(self, operation: str, call: Awaitable[T]) -> T:
        hook = self.on_operation
        if hook is None:
            return await call
        start = time.perf_counter()
        ok = False
        try:
            result = await call
            ok = True
            return result
        finally:
            hook(operation, time.perf_counter() - start, ok)

    # -- life cycle -----------------------------------------------------------

    # Whether brokers on several hosts can open this one storage, as a cluster
    # needs (memory:// lives inside one broker process).
    shared: bool = True

    async def identity(self) -> str:
        """This storage's identity: made when the storage was created and kept in
        it, so every broker that opens the same storage reads the same one (a
        cluster checks by it that its brokers share one storage)."""
        return await self._timed("identity", self._identity())

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect and create the schema. Called once before any other call."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Flush and release connections."""

    async def migrate(self) -> Migration:
        """Upgrade the store in place to the stored format this dejaq writes
        (``dejaq storage migrate``), opening and closing it itself: a store that
        keeps data (SQLite, PostgreSQL, Redis) carries its format version, and
        ``open`` refuses a version it cannot read. Idempotent: a store at this
        version, or new, is only marked with it. No broker may write the store
        meanwhile. ``StorageError`` for a store newer than this dejaq. Memory
        storage keeps nothing: nothing to do."""
        return Migration(None, None, 0)

    async def healthy(self) -> bool:
        """True when the backend answers."""
        return True

    async def server_time_us(self) -> int | None:
        """The storage server's clock, in microseconds since the epoch, read in
        one round trip; None when the storage has no clock of its own (embedded
        storage: the broker's clock decides). ``StorageUnavailable`` when the
        server cannot be reached."""
        return None

    # -- topics ---------------------------------------------------------------

    async def create_topic(self, topic: Topic) -> None:
        """Store a new topic; ``AlreadyExists`` if the name is taken."""
        await self._timed("create_topic", self._create_topic(topic))

    async def delete_topic(self, name: str) -> None:
        """Delete a topic with all its messages (live and dead); ``NotFound`` if absent.
        From its return no call finds the topic or any of its messages, and a
        topic created under the name starts empty; a backend may free the
        messages' space after it returns (SQLite does, in bounded chunks)."""
        await self._timed("delete_topic", self._delete_topic(name))

    async def update_topic(self, topic: Topic) -> None:
        """Store new settings for a topic: the one named ``topic.name`` created at
        ``topic.created_at_ms`` (``NotFound`` if it is gone or was created again).
        The broker changes only settings that do not decide where messages are kept."""
        if not await self._timed("update_topic", self._update_topic(topic)):
            raise NotFound(f"topic {topic.name!r} does not exist")

    async def get_topic(self, name: str) -> Topic:
        topic = await self._timed("get_topic", self._get_topic(name))
        if topic is None:
            raise NotFound(f"topic {name!r} does not exist")
        return topic

    async def list_topics(self) -> list[Topic]:
        """Every topic, sorted by name."""
        return sorted(await self._timed("list_topics", self._list_topics()), key=lambda t: t.name)

    # -- messages -------------------------------------------------------------

    async def insert(
        self,
        topic: str,
        messages: Sequence[NewMessage],
        on_duplicate: OnDuplicate = OnDuplicate.KEEP,
        now: int = 0,
    ) -> list[InsertStatus]:
        """Insert new messages; with ``on_duplicate`` KEEP an id that already
        exists (live or dead) or has a tombstone is a DUPLICATE and is left
        untouched, and within one batch the first of a repeated id wins. With
        REPLACE or EXTEND a waiting message of the id changes instead, judged
        at ``now`` (see the contract's Debounce)."""
        if not messages:
            return []
        if on_duplicate is OnDuplicate.KEEP:
            return await self._timed("insert", self._insert(topic, messages))
        merged, first = last_wins(messages, on_duplicate)
        statuses = await self._timed("insert", self._debounce(topic, merged, on_duplicate, now))
        return repeated(statuses, first, on_duplicate)

    async def lease(self, request: LeaseRequest) -> Leases:
        """Lease up to ``request.limit`` due messages (see the contract)."""
        return await self._timed("lease", self._lease(request))

    async def promote(self, topic: str, buckets: Buckets, now: int, limit: int) -> int:
        """Priority topics: move up to ``limit`` messages that became available by
        ``now`` to their rank (see the contract); how many moved. InvalidArgument
        on a timeline."""
        if limit <= 0:
            raise InvalidArgument(f"promote limit must be positive, not {limit}")
        return await self._timed("promote", self._promote(topic, buckets, now, limit))

    async def next_due(self, topic: str, buckets: Buckets) -> int | None:
        """The smallest timestamp among live messages of ``buckets`` (leased ones
        included: an expiring lease is due again), or None when there is none."""
        return await self._timed("next_due", self._next_due(topic, buckets))

    async def ack(
        self, topic: str, items: Sequence[SettleItem], owner: str, now: int
    ) -> list[Outcome]:
        """Delete messages held by ``owner``."""
        return await self._timed("ack", self._ack(topic, items, owner, now))

    async def extend(
        self, topic: str, items: Sequence[SettleItem], owner: str, until: int
    ) -> list[Outcome]:
        """Push the lease of messages held by ``owner`` to ``until``."""
        return await self._timed("extend", self._extend(topic, items, owner, until))

    async def nack(
        self,
        topic: str,
        items: Sequence[SettleItem],
        owner: str,
        at: int,
        max_deliveries: int,
    ) -> list[Outcome]:
        """Release messages held by ``owner`` to be due at ``at``; a message that has
        used its ``max_deliveries`` goes to the dead timeline instead (version 0)."""
        return await self._timed("nack", self._nack(topic, items, owner, at, max_deliveries))

    async def hand_back(self, topic: str, items: Sequence[HandBack], owner: str) -> list[Outcome]:
        """Undo leases ``owner`` was never sent (taken ahead, and its consumer left):
        each message goes back to its due timestamp, unowned, with that delivery
        uncounted (deliveries - 1) and its version moved on. Refusals as for a
        settle; an at-most-once message, deleted by its lease, is NotFound."""
        return await self._timed("hand_back", self._hand_back(topic, items, owner))

    async def move(
        self,
        topic: str,
        id: str,
        version: int,
        at: int,
        now: int,
        payload: bytes | None = None,
        priority: int | None = None,
    ) -> Settled:
        """Reschedule a message that is not under a live lease; with ``payload``, also
        replace its payload, with ``priority`` its priority, in the same atomic step."""
        return await self._timed("move", self._move(topic, id, version, at, now, payload, priority))

    async def cancel(self, topic: str, id: str, version: int, now: int) -> Settled:
        """Delete a message that is not under a live lease."""
        return await self._timed("cancel", self._cancel(topic, id, version, now))

    async def get(self, topic: str, id: str) -> Message:
        """A message with its payload, live or dead; ``NotFound`` if absent."""
        msg = await self._timed("get", self._get(topic, id))
        if msg is None:
            raise NotFound(f"message {id!r} not found in topic {topic!r}")
        return msg

    async def release(self, topic: str, owner: str, now: int) -> int:
        """Make every message leased by ``owner`` due at ``now`` (a clean disconnect)."""
        return await self._timed("release", self._release(topic, owner, now))

    async def counts(self, topic: str, now: int) -> Counts:
        return await self._timed("counts", self._counts(topic, now))

    async def census(self, now: int) -> dict[str, TopicCensus]:
        """Every topic's counts and oldest live timestamp (as ``next_due`` of all
        buckets) and, when that is a rank, its head, for the broker's gauges:
        one call however many topics, which never holds up the hot path for
        long (a head costs a few index reads, no scan beyond what the counts
        read). A topic created or deleted meanwhile may be missing or present."""
        return await self._timed("census", self._census(now))

    async def forecast(self, topic: str, now: int, step_ms: int, bins: int) -> list[int]:
        """How many waiting messages fall due in each of ``bins`` bins of
        ``step_ms`` from ``now`` (see the contract): ``bins`` counts, earliest
        first. ``InvalidArgument`` unless ``step_ms > 0`` and ``1 <= bins <=
        MAX_FORECAST_BINS``; ``NotFound`` for a missing topic."""
        if step_ms <= 0:
            raise InvalidArgument(f"forecast step must be positive, not {step_ms} ms")
        if not 1 <= bins <= MAX_FORECAST_BINS:
            raise InvalidArgument(f"forecast bins must be 1 to {MAX_FORECAST_BINS}, not {bins}")
        return await self._timed("forecast", self._forecast(topic, Forecast(now, step_ms, bins)))

    async def list_dead(self, topic: str, after_id: str, limit: int) -> list[Message]:
        """Dead messages with ``id > after_id``, ascending by id."""
        return await self._timed("list_dead", self._list_dead(topic, after_id, limit))

    async def scan(self, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage:
        """Up to ``limit`` messages of ``bucket`` (live and dead) with ``id > after_id``,
        ascending by id (see the contract); a bucket the topic lacks is empty."""
        if limit <= 0:
            raise InvalidArgument(f"scan limit must be positive, not {limit}")
        return await self._timed("scan", self._scan(topic, bucket, after_id, limit))

    async def by_due(self, topic: str, after: tuple[int, str] | None, limit: int) -> list[Message]:
        """Up to ``limit`` live messages after ``after`` in ``(timestamp, id)``
        order (see the contract); ``NotFound`` for a missing topic."""
        if limit <= 0:
            raise InvalidArgument(f"page limit must be positive, not {limit}")
        return await self._timed("by_due", self._by_due(topic, after, limit))

    async def keys(self, topic: str, now: int, limit: int) -> list[KeyLoad]:
        """The busiest keys of a topic by due messages (see the contract);
        ``NotFound`` for a missing topic, ``InvalidArgument`` unless
        ``1 <= limit <= MAX_KEYS_LISTED``."""
        if not 1 <= limit <= MAX_KEYS_LISTED:
            raise InvalidArgument(f"keys limit must be 1 to {MAX_KEYS_LISTED}, not {limit}")
        return await self._timed("keys", self._keys(topic, now, limit))

    async def redrive(self, topic: str, ids: Sequence[str] | None, at: int) -> int:
        """Put dead messages (all when ``ids`` is None) back, due at ``at``."""
        return await self._timed("redrive", self._redrive(topic, ids, at))

    async def purge_dead(self, topic: str, died_before: int) -> int:
        """Delete dead messages that died before ``died_before``."""
        return await self._timed("purge_dead", self._purge_dead(topic, died_before))

    async def forget_tombstones(self, topic: str, ids: Sequence[str]) -> int:
        """Forget the tombstones of ``ids`` at once (the broker stores again an
        at-most-once message it took ahead and never sent); how many there were."""
        if not ids:
            return 0
        return await self._timed("forget_tombstones", self._forget_tombstones(topic, ids))

    async def purge_tombstones(self, topic: str, deleted_before: int, limit: int) -> int:
        """Forget up to ``limit`` tombstones of ids deleted before ``deleted_before``
        (the ids become free again); how many were forgotten. Bounded, so a sweep
        never holds the storage for long: call again while it returns ``limit``."""
        if limit <= 0:
            raise InvalidArgument(f"purge limit must be positive, not {limit}")
        return await self._timed(
            "purge_tombstones", self._purge_tombstones(topic, deleted_before, limit)
        )

    # -- primitives -----------------------------------------------------------

    @abc.abstractmethod
    async def _identity(self) -> str: ...
    @abc.abstractmethod
    async def _create_topic(self, topic: Topic) -> None: ...
    @abc.abstractmethod
    async def _delete_topic(self, name: str) -> None: ...
    @abc.abstractmethod
    async def _update_topic(self, topic: Topic) -> bool: ...
    @abc.abstractmethod
    async def _get_topic(self, name: str) -> Topic | None: ...
    @abc.abstractmethod
    async def _list_topics(self) -> list[Topic]: ...
    @abc.abstractmethod
    async def _insert(self, topic: str, messages: Sequence[NewMessage]) -> list[InsertStatus]: ...
    @abc.abstractmethod
    async def _debounce(
        self, topic: str, messages: Sequence[NewMessage], mode: OnDuplicate, now: int
    ) -> list[InsertStatus]:
        """``insert`` with REPLACE or EXTEND (``mode``): ``messages`` name each id once."""

    @abc.abstractmethod
    async def _lease(self, request: LeaseRequest) -> Leases: ...
    @abc.abstractmethod
    async def _promote(self, topic: str, buckets: Buckets, now: int, limit: int) -> int: ...
    @abc.abstractmethod
    async def _next_due(self, topic: str, buckets: Buckets) -> int | None: ...
    @abc.abstractmethod
    async def _ack(
        self, topic: str, items: Sequence[SettleItem], owner: str, now: int
    ) -> list[Outcome]: ...
    @abc.abstractmethod
    async def _extend(
        self, topic: str, items: Sequence[SettleItem], owner: str, until: int
    ) -> list[Outcome]: ...
    @abc.abstractmethod
    async def _nack(
        self, topic: str, items: Sequence[SettleItem], owner: str, at: int, max_deliveries: int
    ) -> list[Outcome]: ...
    @abc.abstractmethod
    async def _hand_back(
        self, topic: str, items: Sequence[HandBack], owner: str
    ) -> list[Outcome]: ...
    @abc.abstractmethod
    async def _move(
        self,
        topic: str,
        id: str,
        version: int,
        at: int,
        now: int,
        payload: bytes | None,
        priority: int | None,
    ) -> Settled: ...
    @abc.abstractmethod
    async def _cancel(self, topic: str, id: str, version: int, now: int) -> Settled: ...
    @abc.abstractmethod
    async def _get(self, topic: str, id: str) -> Message | None: ...
    @abc.abstractmethod
    async def _release(self, topic: str, owner: str, now: int) -> int: ...
    @abc.abstractmethod
    async def _counts(self, topic: str, now: int) -> Counts: ...
    @abc.abstractmethod
    async def _forecast(self, topic: str, forecast: Forecast) -> list[int]: ...
    @abc.abstractmethod
    async def _list_dead(self, topic: str, after_id: str, limit: int) -> list[Message]: ...
    @abc.abstractmethod
    async def _scan(self, topic: str, bucket: int, after_id: str, limit: int) -> ScanPage: ...
    @abc.abstractmethod
    async def _by_due(
        self, topic: str, after: tuple[int, str] | None, limit: int
    ) -> list[Message]: ...
    @abc.abstractmethod
    async def _keys(self, topic: str, now: int, limit: int) -> list[KeyLoad]: ...
    @abc.abstractmethod
    async def _redrive(self, topic: str, ids: Sequence[str] | None, at: int) -> int: ...
    @abc.abstractmethod
    async def _purge_dead(self, topic: str, died_before: int) -> int: ...
    @abc.abstractmethod
    async def _forget_tombstones(self, topic: str, ids: Sequence[str]) -> int: ...
    @abc.abstractmethod
    async def _purge_tombstones(self, topic: str, deleted_before: int, limit: int) -> int: ...

    async def _census(self, now: int) -> dict[str, TopicCensus]:
        """Topic by topic, for backends whose counts read an index (memory,
        Redis): ``_counts`` and ``_oldest`` per topic, ``census_chunk`` topics
        at once (concurrent round trips on a server), yielding to the loop
        between chunks. A backend whose counts scan rows overrides it with one
        set-based query off its write path."""

        async def one(topic: Topic) -> tuple[str, TopicCensus] | None:
            try:
                counts = await self._counts(topic.name, now)
                oldest, head = await self._oldest(topic, now)
            except NotFound:
                return None  # deleted meanwhile
            return topic.name, TopicCensus(topic.settings.buckets, counts, oldest, head)

        topics = await self._list_topics()
        out: dict[str, TopicCensus] = {}
        size = self.census_chunk
        for start in range(0, len(topics), size):
            chunk = topics[start : start + size]
            out.update(e for e in await asyncio.gather(*map(one, chunk)) if e is not None)
            await asyncio.sleep(0)
        return out

    async def _oldest(self, topic: Topic, now: int) -> tuple[int | None, Head | None]:
        """For the default ``_census``: the topic's oldest live timestamp (as
        ``next_due`` of every bucket) and, when that is a rank, its ``Head`` at
        ``now``; ``NotFound`` when the topic is gone. This default knows no
        head (a priority topic's lag then reads 0): a backend that keeps the
        default census finds it from its indexes (one that overrides
        ``_census`` need not)."""
        return await self._next_due(topic.name, None), None
