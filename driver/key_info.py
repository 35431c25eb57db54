"""What the admin calls on keys answer: a key's limits, and a busy key's load."""

from __future__ import annotations

from dataclasses import dataclass

from dejaq.core.key_limits import KeyLimit, Limits
from dejaq.core.wire.convert import key_limit_from_pb
from dejaq.proto import dejaq_pb2 as pb


@dataclass(frozen=True)
class KeyLimitInfo:
    """A key's limits as they apply (``limits``; 0: none), and its override
    of the topic's (None: it has none)."""

    topic: str
    key: str
    limits: Limits
    override: KeyLimit | None


@dataclass(frozen=True)
class KeyInfo:
    """One of a topic's busiest keys: messages due now, held under a lease,
    how late its oldest due message runs, and its limits."""

    key: str
    due: int
    held: int
    oldest_ms: int  # 0: none due
    lateness_ms: int
    limits: Limits


def key_limit_info(p: pb.KeyLimitView) -> KeyLimitInfo:
    override = key_limit_from_pb(p.override) if p.overridden else None
    return KeyLimitInfo(p.topic, p.key, Limits(p.concurrency, p.rate, p.burst), override)


def key_info(p: pb.KeyLoad) -> KeyInfo:
    limits = Limits(p.concurrency, p.rate, p.burst)
    return KeyInfo(p.key, p.due, p.held, p.oldest_ms, p.lateness_ms, limits)
