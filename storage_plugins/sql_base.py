"""What the SQL backends (``sqlite://``, ``postgresql://``) share.

Both keep the same three tables (topics; message metadata; payloads apart) and
run each call as read, decide, write inside one transaction. This module holds
everything between the read and the write, with no I/O: the row shapes the
statements select, the mapping of rows to model values, and the planners that
apply ``rules`` to the rows read. A backend only runs statements (its own SQL
module) and applies a plan, so the two cannot drift apart in semantics.

One exception: PostgreSQL decides a lease pass inside its one statement (a
round trip per pass, not three), so ``rules.lease_fate`` is spelled in its
SQL too; tests/storage_plugins/test_postgres.py pins the two together.
SQLite, in process, reads and plans here (``plan_lease``).

A settle batch is planned as a whole: items run in order against the states
read up front, each seeing what the items before it did (an id acked by the
first item is not found by the second), and the plan carries each touched
row's final state, so it can be written in one batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dejaq.core.model import (
    InsertStatus,
    LeasedMessage,
    Message,
    NewMessage,
    OnDuplicate,
    Settled,
    Topic,
    TopicSettings,
)
from dejaq.storage_plugins.base import HandBack, KeyLoad, Outcome, SettleItem
from dejaq.storage_plugins.rules import (
    Fate,
    dies_on_nack,
    effective_max_deliveries,
    lease_fate,
    move_refusal,
    on_duplicate,
    settle_refusal,
)

# -- rows <-> model -----------------------------------------------------------

# The cursor before every message (``Storage.by_due`` from the first): the
# lowest timestamp a column holds, below any rank.
FIRST = (-(2**63), "")


def settings_json(topic: Topic) -> str:
    """A topic's settings as the JSON text both backends store."""
    return json.dumps(topic.settings.to_dict())


def topic_from_row(row: Sequence[Any]) -> Topic:
    """A ``(name, settings JSON, created_at_ms)`` row."""
    name, settings, created_at_ms = row
    return Topic(name, TopicSettings.from_dict(json.loads(settings)), created_at_ms)


def message_from_row(row: Sequence[Any]) -> Message:
    """A row holding the columns of ``Message`` in order (``dead`` as bool or 0/1)."""
    (id, ts, payload, version, deliveries, owner, bucket, md, expires_at, dead, priority, key,
     headers) = row  # fmt: skip
    return Message(
        id,
        ts,
        bytes(payload),
        version,
        deliveries,
        owner,
        bucket,
        md,
        expires_at,
        bool(dead),
        priority,
        key,
        bytes(headers),
    )


class RowState(NamedTuple):
    """A message's mutable metadata, as the backends' state statements select it."""

    ts: int
    version: int
    deliveries: int
    owner: str | None
    max_deliveries: int
    dead: bool  # or 0/1 from SQLite: only its truth is used

    @property
    def timestamp(self) -> int:
        """``ts`` under the name ``rules.Stored`` reads."""
        return self.ts


class Due(NamedTuple):
    """A due message as the lease statements select it."""

    id: str
    ts: int
    version: int
    deliveries: int
    max_deliveries: int
    expires_at: int
    priority: int
    key: str = ""


# -- insert -------------------------------------------------------------------


def plan_insert(
    messages: Sequence[NewMessage], taken: Iterable[str] = ()
) -> tuple[list[InsertStatus], list[NewMessage]]:
    """Statuses for a batch and the messages to store: an id in ``taken`` (already
    stored) is a duplicate, and within the batch the first of a repeated id wins."""
    seen = set(taken)
    statuses: list[InsertStatus] = []
    fresh: list[NewMessage] = []
    for m in messages:
        if m.id in seen:
            statuses.append(InsertStatus.DUPLICATE)
            continue
        seen.add(m.id)
        fresh.append(m)
        statuses.append(InsertStatus.ACCEPTED)
    return statuses, fresh


@dataclass
class DebouncePlan:
    """What an insert that may replace or extend (``plan_debounce``) does: a
    status per message, and the messages to store, to replace and to move."""

    statuses: list[InsertStatus]
    fresh: list[NewMessage]
    replaced: list[NewMessage]
    extended: list[NewMessage]

    @property
    def changed(self) -> list[str]:
        """The ids of the messages there that change."""
        return [m.id for m in self.replaced + self.extended]


def plan_debounce(
    messages: Sequence[NewMessage],
    states: Mapping[str, RowState],
    buried: Iterable[str],
    mode: OnDuplicate,
    now: int,
) -> DebouncePlan:
    """``insert`` in ``mode`` over the stored ``states`` of its ids and the
    tombstoned ones (``buried``); each id once (Storage.insert merged repeats)."""
    tombs = set(buried)
    plan = DebouncePlan([], [], [], [])
    for m in messages:
        st = states.get(m.id)
        if st is None and m.id not in tombs:
            plan.statuses.append(InsertStatus.ACCEPTED)
            plan.fresh.append(m)
            continue
        live = st is not None and not st.dead
        owner, ts = (st.owner, st.ts) if st is not None else (None, 0)
        verdict = on_duplicate(mode, live, owner, ts, now)
        plan.statuses.append(verdict)
        if verdict is InsertStatus.REPLACED:
            plan.replaced.append(m)
        elif verdict is InsertStatus.EXTENDED:
            plan.extended.append(m)
    return plan


# -- lease --------------------------------------------------------------------


@dataclass
class LeasePlan:
    """What one lease pass does with the due rows it read (ids in timestamp order)."""

    deliver: list[Due] = field(default_factory=list)
    keep: list[str] = field(default_factory=list)  # delivered, now leased to the owner
    drop: list[str] = field(default_factory=list)  # delivered at-most-once: deleted
    kill: list[str] = field(default_factory=list)  # dead-lettered instead of delivered


def plan_lease(rows: Iterable[Due], now: int, max_deliveries: int) -> LeasePlan:
    """Split due rows by fate (``rules.lease_fate``), as the contract's lease pass says."""
    plan = LeasePlan()
    for row in rows:
        at = max(now, row.ts)  # judged when it will be delivered
        fate = lease_fate(row.deliveries, row.max_deliveries, max_deliveries, row.expires_at, at)
        if fate is Fate.KILL:
            plan.kill.append(row.id)
            continue
        plan.deliver.append(row)
        (plan.drop if fate is Fate.DROP else plan.keep).append(row.id)
    return plan


def delivery(row: Due, payload: bytes, headers: bytes = b"") -> LeasedMessage:
    """The delivery of a planned row: its due time, the bumped version and count."""
    return LeasedMessage(
        row.id,
        row.ts,
        bytes(payload),
        row.version + 1,
        row.deliveries + 1,
        row.priority,
        row.key,
        bytes(headers),
    )


# -- ack / extend / nack ------------------------------------------------------


@dataclass
class SettlePlan:
    """Outcomes of a settle batch, in item order, and what to write."""

    outcomes: list[Outcome] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    updated: dict[str, RowState] = field(default_factory=dict)  # id -> final state


# (id, state) -> (outcome, new state, or None to delete)
SettleStep = Callable[[str, RowState], tuple[Settled, RowState | None]]


def _plan_settle(
    items: Sequence[SettleItem], states: Mapping[str, RowState | None], owner: str, step: SettleStep
) -> SettlePlan:
    plan = SettlePlan()
    now = dict(states)
    for id, version in items:
        st = now.get(id)
        err = settle_refusal(id, st, owner, version)
        if err is not None:
            plan.outcomes.append(err)
            continue
        assert st is not None
        outcome, new = step(id, st)
        plan.outcomes.append(outcome)
        now[id] = new
        if new is None:
            plan.updated.pop(id, None)
            plan.deleted.add(id)
        else:
            plan.updated[id] = new
    return plan


def plan_ack(
    items: Sequence[SettleItem], states: Mapping[str, RowState | None], owner: str
) -> SettlePlan:
    """Delete the messages ``owner`` holds."""
    return _plan_settle(items, states, owner, lambda id, st: (Settled(id, 0, st.ts), None))


def plan_extend(
    items: Sequence[SettleItem], states: Mapping[str, RowState | None], owner: str, until: int
) -> SettlePlan:
    """Push the leases ``owner`` holds to ``until``."""

    def step(id: str, st: RowState) -> tuple[Settled, RowState]:
        new = st._replace(ts=until, version=st.version + 1)
        return Settled(id, new.version, until), new

    return _plan_settle(items, states, owner, step)


def plan_nack(
    items: Sequence[SettleItem],
    states: Mapping[str, RowState | None],
    owner: str,
    at: int,
    max_deliveries: int,
) -> SettlePlan:
    """Release ``owner``'s messages to be due at ``at``, or kill those out of deliveries."""

    def step(id: str, st: RowState) -> tuple[Settled, RowState]:
        if dies_on_nack(st.deliveries, effective_max_deliveries(st.max_deliveries, max_deliveries)):
            return Settled(id, 0, at), killed(st, at)
        new = st._replace(ts=at, owner=None, version=st.version + 1)
        return Settled(id, new.version, at), new

    return _plan_settle(items, states, owner, step)


def plan_hand_back(
    items: Sequence[HandBack], states: Mapping[str, RowState | None], owner: str
) -> SettlePlan:
    """Put ``owner``'s never-sent messages back at their due times, that delivery uncounted."""
    due = {id: ts for id, _, ts in items}

    def step(id: str, st: RowState) -> tuple[Settled, RowState]:
        new = st._replace(
            ts=due[id], owner=None, deliveries=st.deliveries - 1, version=st.version + 1
        )
        return Settled(id, new.version, new.ts), new

    return _plan_settle([(id, version) for id, version, _ in items], states, owner, step)


def killed(st: RowState, at: int) -> RowState:
    """The state of a message sent to the dead timeline at ``at``."""
    return st._replace(ts=at, owner=None, dead=True, version=st.version + 1)


# -- move / cancel ------------------------------------------------------------


def _check_movable(id: str, st: RowState | None, version: int, now: int) -> RowState:
    err = move_refusal(id, st, version, now)
    if err is not None:
        raise err
    assert st is not None
    return st


def plan_move(
    id: str, st: RowState | None, version: int, at: int, now: int
) -> tuple[Settled, RowState]:
    """Reschedule a message not under a live lease; raises the refusal."""
    st = _check_movable(id, st, version, now)
    new = st._replace(ts=at, owner=None, version=st.version + 1)
    return Settled(id, new.version, at), new


def plan_cancel(id: str, st: RowState | None, version: int, now: int) -> Settled:
    """Delete a message not under a live lease; raises the refusal."""
    st = _check_movable(id, st, version, now)
    return Settled(id, 0, st.ts)


def binned(rows: Iterable[Sequence[Any]], bins: int) -> list[int]:
    """The counts of a forecast query's (bin, count) rows, ``bins`` of them
    (a bin with no row holds 0)."""
    counts = [0] * bins
    for index, count in rows:
        counts[int(index)] += int(count)
    return counts


# -- fair lease passes --------------------------------------------------------


@dataclass
class FairShare:
    """A pass's ``limit`` shared max-min fairly among its keys, step by step
    (the contract's "Fair lease passes"), for a backend that can take a key's
    earliest due messages but not count a key's backlog.

    ``active`` holds the keys with messages due, earliest head first. Each
    step ``allot`` gives every active key an equal part of what is left (the
    remainder to the earliest keys, one each; with fewer left than keys, one
    each to the earliest), bounded by the key's cap. The backend takes up to
    that many of the key's earliest due messages and reports with ``took``: a
    key that yields fewer rows than asked has no more due (or they are held
    by another leaser), and one at its cap is done. Dead letters take rows
    but no part of the limit, so their key stays in. The steps end when the
    limit is reached or no key is left: each step reads about what it takes,
    never a key's whole backlog."""

    limit: int
    active: list[str]
    caps: Mapping[str, int] | None = None
    delivered: int = 0
    taken: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of(cls, limit: int, heads: Mapping[str, int], caps: Mapping[str, int] | None) -> FairShare:
        """From each key's earliest due timestamp (ties by key); a key capped at 0 is left out."""
        order = sorted(heads, key=lambda k: (heads[k], k))
        caps = caps or {}
        return cls(limit, [k for k in order if caps.get(k) != 0], caps)

    def _room(self, key: str) -> int | None:
        cap = None if self.caps is None else self.caps.get(key)
        return None if cap is None else cap - self.taken.get(key, 0)

    def allot(self) -> dict[str, int]:
        """How many of each key's due messages the next step takes (empty: the pass is done)."""
        left = self.limit - self.delivered
        if left <= 0 or not self.active:
            return {}
        share, extra = divmod(left, len(self.active))
        out: dict[str, int] = {}
        for i, key in enumerate(self.active):
            want = share + (i < extra)
            room = self._room(key)
            if room is not None:
                want = min(want, room)
            if want > 0:
                out[key] = want
        return out

    def took(self, key: str, asked: int, rows: int, delivered: int) -> None:
        """Of ``asked`` messages of ``key``, ``rows`` were read and ``delivered`` leased."""
        self.taken[key] = self.taken.get(key, 0) + delivered
        self.delivered += delivered
        if rows < asked or self._room(key) == 0:
            self.active.remove(key)


def heads_of(lanes: Iterable[Sequence[Any]]) -> tuple[dict[str, int], dict[str, list[int]]]:
    """From due lanes ``(key, bucket, head)``: each key's earliest head and its due buckets."""
    heads: dict[str, int] = {}
    buckets: dict[str, list[int]] = {}
    for key, bucket, head in lanes:
        heads[key] = min(head, heads.get(key, head))
        buckets.setdefault(key, []).append(int(bucket))
    return heads, buckets


def lane_heads(messages: Iterable[NewMessage]) -> dict[tuple[int, str], int]:
    """The earliest timestamp of each keyed ``(bucket, key)`` lane among new messages."""
    heads: dict[tuple[int, str], int] = {}
    for m in messages:
        if m.key:
            lane = (m.bucket, m.key)
            heads[lane] = min(m.timestamp, heads.get(lane, m.timestamp))
    return heads


def busiest(
    due: Iterable[Sequence[Any]], held: Iterable[Sequence[Any]], limit: int
) -> list[KeyLoad]:
    """``Storage.keys`` from ``(key, due count, oldest)`` and ``(key, held count)`` rows."""
    counts: dict[str, int] = {}
    oldest: dict[str, int] = {}
    for key, count, first in due:
        counts[key] = counts.get(key, 0) + int(count)
        oldest[key] = min(int(first), oldest.get(key, int(first)))
    holding: dict[str, int] = {}
    for key, count in held:
        holding[key] = holding.get(key, 0) + int(count)
    named = {k for k, n in counts.items() if n} | {k for k, n in holding.items() if n}
    ranked = sorted(named, key=lambda k: (-counts.get(k, 0), k))[:limit]
    return [
        KeyLoad(k, counts.get(k, 0), holding.get(k, 0), oldest.get(k, 0) if counts.get(k) else 0)
        for k in ranked
    ]
