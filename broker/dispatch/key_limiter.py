"""A topic's limits per key, as one broker's dispatcher applies them.

Before each lease call the dispatcher asks ``caps``: for every key it knows of
(held here, rate-limited lately, or cut lately) the most messages
of it the call may take, from the key's share of the concurrency (``share``
of the topic's limit, less what this broker holds of it: ``key_held.py``) and
its token bucket (the rate's share, refilled by the dispatcher's clock, holding
at most the burst's share, at least one). Storage honours the caps; a key it
has not been told of (its first messages) may come back over its allowance,
and ``trim`` cuts what is over, for the dispatcher to hand back at once. The
key is named in every pass after that. A key with an override is named only
once met, as any other (a caps map of every override, up to 10,000, in every
lease call would cost more than the one cut).

Shares across the cluster: ``core/key_shares.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence

from dejaq.broker.dispatch.key_held import KeyHeld
from dejaq.core.key_limits import KeyLimit, Limits, resolve
from dejaq.core.model import LeasedMessage, TopicSettings

# Keys cut lately stay named in the caps this long after (ms), and at most this many.
CUT_KEPT_MS = 60_000
MAX_CUT_KEPT = 10_000

ConcurrencyShare = Callable[[int], int]  # the topic's limit -> this broker's whole share


class _Tokens:
    __slots__ = ("at_ms", "tokens")

    def __init__(self, tokens: float, at_ms: int) -> None:
        self.tokens = tokens
        self.at_ms = at_ms


class KeyLimiter:
    """Caps per key for one topic's lease passes on this broker."""

    def __init__(self, settings: TopicSettings, now_ms: int) -> None:
        self.held = KeyHeld()
        self._tokens: dict[str, _Tokens] = {}
        self._cut: dict[str, int] = {}  # key -> when it was last cut (insertion ordered)
        self._now = now_ms
        self._share = 1.0  # of the topic's buckets (the rates' share)
        self._conc: dict[int, int] = {}  # a concurrency limit -> this broker's share, this pass
        self._conc_share: ConcurrencyShare = lambda n: n
        self._caps: dict[str, int] = {}  # the latest lease call's
        self._waiting: set[str] = set()  # keys that may have more due than they were let take
        self.retune(settings)

    def retune(self, settings: TopicSettings) -> None:
        """The topic's limits changed."""
        self.defaults: Limits = settings.key_defaults()
        self._overrides: dict[str, KeyLimit] = {o.key: o for o in settings.key_limits}
        self.rated = bool(self.defaults.rate) or any(
            o.rate for o in settings.key_limits if o.rate is not None
        )
        self.active = self.defaults.any or any(
            resolve(self.defaults, o).any for o in settings.key_limits
        )

    def limits(self, key: str) -> Limits:
        return resolve(self.defaults, self._overrides.get(key))

    def begin(self, now: int, share: float, concurrency_share: ConcurrencyShare) -> None:
        """A pass at ``now``, this broker serving ``share`` of the buckets."""
        self._now = now
        self._share = share
        self._conc_share = concurrency_share
        self._conc.clear()
        self.held.expire(now)
        for key in [k for k, at in self._cut.items() if at <= now - CUT_KEPT_MS]:
            del self._cut[key]

    def allowance(self, key: str) -> int | None:
        """How many more messages of ``key`` may be leased now (None: no bound)."""
        if not key:
            return None
        lim = self.limits(key)
        out: int | None = None
        if lim.concurrency:
            share = self._conc.get(lim.concurrency)
            if share is None:
                share = self._conc[lim.concurrency] = self._conc_share(lim.concurrency)
            out = max(0, share - self.held.held(key))
        if lim.rate:
            tokens = int(self._refill(key, lim).tokens)
            out = tokens if out is None else min(out, tokens)
        return out

    def caps(self) -> dict[str, int]:
        """The caps of a lease call: every key known here that has a limit."""
        caps: dict[str, int] = {}
        for key in self._known():
            n = self.allowance(key)
            if n is not None:
                caps[key] = n
        self._forget_full()
        self._caps = caps
        return caps

    def trim(
        self, delivered: Sequence[LeasedMessage]
    ) -> tuple[list[LeasedMessage], list[LeasedMessage]]:
        """``delivered`` split into what its keys' allowances take (in order) and
        what is over them (to hand back)."""
        left: dict[str, int | None] = {}
        kept: list[LeasedMessage] = []
        over: list[LeasedMessage] = []
        for m in delivered:
            key = m.key
            if key not in left:
                left[key] = self.allowance(key)
            n = left[key]
            if n is None:
                kept.append(m)
            elif n > 0:
                left[key] = n - 1
                kept.append(m)
            else:
                over.append(m)
                self._waiting.add(key)
                self._cut.pop(key, None)
                self._cut[key] = self._now
                if len(self._cut) > MAX_CUT_KEPT:
                    del self._cut[next(iter(self._cut))]
        return kept, over

    def took(self, kept: Iterable[LeasedMessage], until: int) -> None:
        """``kept`` were leased here until ``until``: held, and tokens spent."""
        kept = list(kept)
        self.held.leased(((m.id, m.key) for m in kept), until)
        taken: dict[str, int] = {}
        for m in kept:
            if m.key and self.limits(m.key).rate:
                self._refill(m.key, self.limits(m.key)).tokens -= 1
            taken[m.key] = taken.get(m.key, 0) + 1
        # A key let take n > 0 that took them all may have more due; one that
        # took fewer has none; one let take none is as it was.
        for key, cap in self._caps.items():
            if cap > 0:
                if taken.get(key, 0) >= cap:
                    self._waiting.add(key)
                else:
                    self._waiting.discard(key)

    def next_token_ms(self) -> int | None:
        """When the next whole token comes in for a key out of them (None: none waits)."""
        best: int | None = None
        for key, t in self._tokens.items():
            if t.tokens >= 1:
                continue
            per_ms = self.limits(key).rate * self._share / 1000
            if per_ms <= 0:
                continue
            at = t.at_ms + max(1, math.ceil((1 - t.tokens) / per_ms))
            best = at if best is None else min(best, at)
        return best

    def blocked(self) -> bool:
        """Some key may have messages due that its limit holds back."""
        return bool(self._waiting)

    def unblock(self) -> None:
        """Nothing is due: no key waits at its limit."""
        self._waiting.clear()

    def _known(self) -> set[str]:
        keys = set(self.held.keys())
        keys.update(self._tokens)
        keys.update(self._cut)
        return keys

    def _capacity(self, lim: Limits) -> float:
        return max(1.0, lim.burst_tokens() * self._share)

    def _refill(self, key: str, lim: Limits) -> _Tokens:
        t = self._tokens.get(key)
        cap = self._capacity(lim)
        if t is None:
            t = self._tokens[key] = _Tokens(cap, self._now)
        elif self._now > t.at_ms:
            per_ms = lim.rate * self._share / 1000
            t.tokens = min(cap, t.tokens + (self._now - t.at_ms) * per_ms)
            t.at_ms = self._now
        return t

    def _forget_full(self) -> None:
        """A full bucket is the same as none: forget it (bounds the table)."""
        full = [
            k
            for k, t in self._tokens.items()
            if t.at_ms == self._now and t.tokens >= self._capacity(self.limits(k))
        ]
        for k in full:
            del self._tokens[k]
