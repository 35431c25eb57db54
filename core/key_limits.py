"""Limits per key: how many messages of one key may be held (leased) at once,
and delivered a second, across the cluster.

A topic sets them for every key (``TopicSettings.key_concurrency``,
``key_rate``, ``key_burst``; 0: no limit) and may override them for named keys
(``key_limits``, at most ``MAX_KEY_OVERRIDES``). An override's field left
``None`` takes the topic's; 0 in it lifts that limit for the key.

The brokers share each limit out (``core/key_shares.py``) and pass
each lease pass the caps that keep every key under its share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from dejaq.core.errors import InvalidArgument, NotFound
from dejaq.core.keys import check_key

MAX_KEY_OVERRIDES: Final = 10_000
MAX_KEY_CONCURRENCY: Final = 1_000_000
MAX_KEY_RATE: Final = 1_000_000.0
MAX_KEY_BURST: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class KeyLimit:
    """One key's override of the topic's limits (None: the topic's)."""

    key: str
    concurrency: int | None = None
    rate: float | None = None
    burst: int | None = None

    def to_dict(self) -> dict[str, object]:
        """The stored form: the fields set only."""
        d: dict[str, object] = {"key": self.key}
        for name in ("concurrency", "rate", "burst"):
            value = getattr(self, name)
            if value is not None:
                d[name] = value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> KeyLimit:
        return cls(str(d["key"]), d.get("concurrency"), d.get("rate"), d.get("burst"))


class Limits(NamedTuple):
    """One key's limits as they apply (0: none)."""

    concurrency: int = 0
    rate: float = 0.0
    burst: int = 0

    @property
    def any(self) -> bool:
        return bool(self.concurrency or self.rate)

    def burst_tokens(self) -> float:
        """Deliveries the key may make at once after a quiet time: its burst, at
        least one (a rate below one a second still delivers)."""
        return float(max(1, self.burst))


def resolve(default: Limits, override: KeyLimit | None) -> Limits:
    """A key's limits: the override's fields where set, else the topic's."""
    if override is None:
        return default
    return Limits(
        default.concurrency if override.concurrency is None else override.concurrency,
        default.rate if override.rate is None else override.rate,
        default.burst if override.burst is None else override.burst,
    )


def concurrency(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_KEY_CONCURRENCY:
        raise InvalidArgument(
            f"a key's concurrency is a whole number 0 to {MAX_KEY_CONCURRENCY}"
            f" (0: no limit), not {n!r}"
        )
    return n


def rate(r: float) -> float:
    if isinstance(r, bool) or not isinstance(r, int | float):
        raise InvalidArgument(f"a key's rate is a number of deliveries a second, not {r!r}")
    if not math.isfinite(r) or not 0 <= r <= MAX_KEY_RATE:
        raise InvalidArgument(
            f"a key's rate is 0 to {MAX_KEY_RATE:g} deliveries a second (0: no limit), not {r!r}"
        )
    return float(r)


def burst(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_KEY_BURST:
        raise InvalidArgument(
            f"a key's burst is a whole number 0 to {MAX_KEY_BURST} (0: one), not {n!r}"
        )
    return n


def check_override(o: KeyLimit) -> KeyLimit:
    """``o`` when it may be stored; ``InvalidArgument`` saying why not."""
    if not o.key:
        raise InvalidArgument("a key override needs a key (messages without one have no limit)")
    check_key(o.key)
    if o.concurrency is None and o.rate is None and o.burst is None:
        raise InvalidArgument(
            f"say what to set for key {o.key!r}: a concurrency, a rate or a burst"
        )
    return KeyLimit(
        o.key,
        None if o.concurrency is None else concurrency(o.concurrency),
        None if o.rate is None else rate(o.rate),
        None if o.burst is None else burst(o.burst),
    )


def with_override(overrides: tuple[KeyLimit, ...], o: KeyLimit) -> tuple[KeyLimit, ...]:
    """``overrides`` with ``o`` set (merged into the key's own, if any), in key
    order; ``InvalidArgument`` past ``MAX_KEY_OVERRIDES``."""
    o = check_override(o)
    by_key = {x.key: x for x in overrides}
    old = by_key.get(o.key)
    if old is None and len(by_key) >= MAX_KEY_OVERRIDES:
        raise InvalidArgument(
            f"a topic holds at most {MAX_KEY_OVERRIDES} key overrides: remove one first"
        )
    if old is not None:
        o = KeyLimit(
            o.key,
            old.concurrency if o.concurrency is None else o.concurrency,
            old.rate if o.rate is None else o.rate,
            old.burst if o.burst is None else o.burst,
        )
    by_key[o.key] = o
    return tuple(by_key[k] for k in sorted(by_key))


def without_override(overrides: tuple[KeyLimit, ...], key: str) -> tuple[KeyLimit, ...]:
    """``overrides`` without ``key``'s; ``NotFound`` when it has none."""
    kept = tuple(x for x in overrides if x.key != key)
    if len(kept) == len(overrides):
        raise NotFound(f"key {key!r} has no override to remove")
    return kept
