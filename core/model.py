"""The data model: topics, messages, and the values storage returns."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from dejaq.core.errors import InvalidArgument
from dejaq.core.key_limits import KeyLimit, Limits

DEFAULT_BUCKETS = 64
DEFAULT_LEASE_MS = 30_000
DEFAULT_MAX_PAYLOAD = 1 << 20
MAX_BUCKETS = 4096
MAX_PAYLOAD_LIMIT = 16 << 20
DEFAULT_DEDUP_WINDOW_MS = 24 * 3600 * 1000
MAX_TIMESTAMP = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: the latest a message may be due

# Topic kinds: a timeline delivers each message at its millisecond; a priority
# topic delivers the most urgent available message first (core/priority.py).
KIND_TIMELINE = "timeline"
KIND_PRIORITY = "priority"
KINDS = (KIND_TIMELINE, KIND_PRIORITY)


class State(enum.Enum):
    WAITING = "waiting"
    DUE = "due"
    LEASED = "leased"
    DEAD = "dead"


DEFAULT_DELIVER_TIMEOUT_MS = 10_000
DEFAULT_DELIVER_CONCURRENCY = 64
DEFAULT_DELIVER_BACKOFF_MS = 1_000


@dataclass(frozen=True, slots=True)
class Webhook:
    """Where a webhook topic's broker POSTs each due message (``docs/webhooks.md``).

    ``secret`` signs every request; it is never shown in a repr (logs) and only
    answers to admin calls carry it (``broker/api/control.py``)."""

    url: str
    timeout_ms: int = DEFAULT_DELIVER_TIMEOUT_MS
    concurrency: int = DEFAULT_DELIVER_CONCURRENCY  # requests in flight per broker
    headers: tuple[tuple[str, str], ...] = ()
    secret: str = field(default="", repr=False)
    backoff_ms: int = DEFAULT_DELIVER_BACKOFF_MS  # first retry delay, doubled each time

    def __post_init__(self) -> None:
        # Stored as JSON lists: made tuples again, so equal settings compare equal.
        object.__setattr__(self, "headers", tuple((str(k), str(v)) for k, v in self.headers))


@dataclass(frozen=True, slots=True)
class TopicSettings:
    buckets: int = DEFAULT_BUCKETS
    lease_ms: int = DEFAULT_LEASE_MS
    max_deliveries: int = 0  # 0 = unlimited; 1 = at-most-once
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD
    dead_retention_ms: int = 0  # 0 = keep forever
    expiry_ms: int = 0  # 0 = never
    # How long the id of a deleted message (acked, cancelled, delivered at most
    # once) stays taken, so a resent produce is a duplicate; 0 = free at once.
    dedup_window_ms: int = DEFAULT_DEDUP_WINDOW_MS
    # Deliveries a second across the cluster; 0 = no cap (a due burst flows at once).
    max_rate: float = 0.0
    kind: str = KIND_TIMELINE
    # Priority topics only: priorities 0 (most urgent) .. priorities - 1, and the
    # aging step in ms (0 = no aging; see core/priority.py).
    priorities: int = 0
    aging_ms: int = 0
    webhook: Webhook | None = None  # None: consumers read the topic over gRPC
    # Paused: produces are stored, nothing is leased or sent (docs/topic-kinds.md).
    # The latest pause's start and end (0: not ended) tell its lateness apart.
    paused: bool = False
    paused_at_ms: int = 0
    resumed_at_ms: int = 0
    # Limits per key across the cluster (core/key_limits.py; 0 = none): messages
    # of one key held at once, and its deliveries a second with a burst; and
    # named keys' overrides of them.
    key_concurrency: int = 0
    key_rate: float = 0.0
    key_burst: int = 0
    key_limits: tuple[KeyLimit, ...] = ()

    def __post_init__(self) -> None:
        # Stored as JSON lists of dicts: made KeyLimits again, so equal settings compare equal.
        limits = tuple(
            x if isinstance(x, KeyLimit) else KeyLimit.from_dict(x) for x in self.key_limits
        )
        object.__setattr__(self, "key_limits", limits)

    def key_defaults(self) -> Limits:
        """The limits of a key without an override."""
        return Limits(self.key_concurrency, self.key_rate, self.key_burst)

    def to_dict(self) -> dict[str, object]:
        """The stored form: a plain dict (JSON). A topic without a webhook stores
        no ``webhook`` key, and one never paused no pause keys, exactly as before
        either existed (a broker of an older release reads them still)."""
        d = dataclasses.asdict(self)
        if self.webhook is None:
            del d["webhook"]
        for key in _PAUSE_KEYS + _KEY_LIMIT_KEYS:
            if not d[key]:
                del d[key]
        if self.key_limits:
            d["key_limits"] = [x.to_dict() for x in self.key_limits]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TopicSettings:
        """Settings from their stored form (absent keys take their defaults)."""
        d = dict(d)
        hook = d.pop("webhook", None)
        return cls(**d, webhook=None if hook is None else Webhook(**hook))


_PAUSE_KEYS = ("paused", "paused_at_ms", "resumed_at_ms")
_KEY_LIMIT_KEYS = ("key_concurrency", "key_rate", "key_burst", "key_limits")


@dataclass(frozen=True, slots=True)
class Topic:
    name: str
    settings: TopicSettings = field(default_factory=TopicSettings)
    created_at_ms: int = 0


class NewMessage(NamedTuple):
    """A message as produced; ``bucket`` is computed by the broker.

    A NamedTuple rather than a dataclass: one is built per produced message,
    and tuple construction is the cheapest immutable record Python has."""

    id: str
    timestamp: int
    payload: bytes
    bucket: int
    max_deliveries: int = 0  # 0 = topic setting
    expires_at: int = 0  # 0 = none
    priority: int = 0  # priority topics only; 0 = most urgent
    key: str = ""  # the fairness key (core/keys.py); "" = none
    headers: bytes = b""  # encoded headers (core/headers.py); b"" = none


@dataclass(frozen=True, slots=True)
class Message:
    """A message as stored, metadata and payload."""

    id: str
    timestamp: int
    payload: bytes
    version: int
    deliveries: int
    lease_owner: str | None
    bucket: int
    max_deliveries: int = 0
    expires_at: int = 0
    dead: bool = False
    priority: int = 0
    key: str = ""
    headers: bytes = b""

    def state(self, now: int) -> State:
        if self.dead:
            return State.DEAD
        if self.lease_owner is not None and self.timestamp > now:
            return State.LEASED
        return State.DUE if self.timestamp <= now else State.WAITING


class LeasedMessage(NamedTuple):
    """A message just leased: what a consumer receives (one per delivery, hence a tuple)."""

    id: str
    timestamp: int  # due time before the lease
    payload: bytes
    version: int
    deliveries: int
    priority: int = 0
    key: str = ""
    headers: bytes = b""


@dataclass(frozen=True, slots=True)
class Leases:
    """The result of one lease pass."""

    # A list, or columns (core/deliveries.py) where the backend reads them so.
    delivered: Sequence[LeasedMessage]
    lease_until: int
    dead_lettered: int = 0


@dataclass(frozen=True, slots=True)
class Counts:
    waiting: int = 0
    due: int = 0
    leased: int = 0
    dead: int = 0


class InsertStatus(enum.IntEnum):
    """What a produce did with one message (the wire's status byte). A
    DUPLICATE kept what was there; REPLACED, EXTENDED and LEASED answer a
    produce that asked to ``replace`` or ``extend`` a waiting message
    (``OnDuplicate``): LEASED when the one there is being delivered, and was
    left alone."""

    ACCEPTED = 0
    DUPLICATE = 1
    REJECTED = 2
    REPLACED = 3
    EXTENDED = 4
    LEASED = 5


class OnDuplicate(enum.IntEnum):
    """What a produce does when its id is already waiting on the topic:
    ``KEEP`` leaves the waiting message as it is (a DUPLICATE); ``REPLACE``
    gives it the new due time, payload, key, headers, priority, delivery limit
    and expiry (a trailing debounce); ``EXTEND`` moves its due time only. Either
    moves its version on; neither touches a message under a live lease, a dead
    one or a tombstoned id (those answer as ``KEEP`` does, or LEASED)."""

    KEEP = 0
    REPLACE = 1
    EXTEND = 2

    @classmethod
    def named(cls, name: str) -> OnDuplicate:
        """The mode called ``name`` (keep, replace, extend); InvalidArgument otherwise."""
        mode = _MODES.get(name)
        if mode is None:
            raise InvalidArgument(
                f"on_duplicate must be one of keep, replace, extend, not {name!r}"
            )
        return mode

    @property
    def label(self) -> str:
        return self.name.lower()


_MODES = {m.name.lower(): m for m in OnDuplicate}


class Settled(NamedTuple):
    """Outcome of one ack / extend / nack / move / cancel (a tuple: one is built
    per settled message)."""

    id: str
    version: int  # 0 when the message was deleted
    timestamp: int
