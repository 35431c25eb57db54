"""Settling leased messages (ack, extend, nack): one statement for the Consume
stream's Settle frames and the unary Ack / Extend / Nack calls.

A settle of many ids is one storage call. Each id gets its own outcome, so one
stale ack does not spoil the others.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from dejaq.broker.api import validation
from dejaq.broker.context import BrokerContext
from dejaq.broker.observability.metrics import Event
from dejaq.core.errors import DejaqError
from dejaq.core.model import Topic
from dejaq.storage_plugins.base import Outcome, SettleItem


class Kind(enum.Enum):
    ACK = "ack"
    EXTEND = "extend"  # ms: the new lease from now
    NACK = "nack"  # ms: the delay before it is due again


async def settle(
    broker: BrokerContext,
    topic: Topic,
    kind: Kind,
    items: Sequence[SettleItem],
    owner: str,
    ms: int,
) -> list[Outcome]:
    """Apply one settle to ``items`` held by ``owner``; one outcome per item."""
    name = topic.name
    now = broker.clock.now_ms()
    outcomes: list[Outcome]
    if kind is Kind.ACK:
        outcomes = await broker.storage.ack(name, items, owner, now)
        broker.metrics.count(Event.ACKED, name, _done(outcomes))
    elif kind is Kind.EXTEND:
        until = now + validation.lease_ms(ms)
        outcomes = await broker.storage.extend(name, items, owner, until)
        broker.metrics.count(Event.EXTENDED, name, _done(outcomes))
    else:
        at = now + validation.delay_ms(ms)
        md = topic.settings.max_deliveries
        outcomes = await broker.storage.nack(name, items, owner, at, md)
        # A nack answered with version 0 dead-lettered the message.
        dead = sum(1 for o in outcomes if not isinstance(o, DejaqError) and o.version == 0)
        broker.metrics.count(Event.DEAD_LETTERED, name, dead)
        broker.metrics.count(Event.NACKED, name, _done(outcomes) - dead)
        broker.hint(name, at)
    _tell_dispatcher(broker, topic, kind, items, outcomes, now, ms)
    return outcomes


def _tell_dispatcher(
    broker: BrokerContext,
    topic: Topic,
    kind: Kind,
    items: Sequence[SettleItem],
    outcomes: list[Outcome],
    now: int,
    ms: int,
) -> None:
    """The topic's dispatcher counts the messages of each key held here: an ack
    or nack ends a lease (refused, it was not this lease's to end: gone, or
    leased again elsewhere, so it no longer counts either), an extend moves it."""
    d = broker.dispatchers.get(topic.name)
    if d is None or d.topic.created_at_ms != topic.created_at_ms:
        return
    if kind is Kind.EXTEND:
        done = [
            id for (id, _), o in zip(items, outcomes, strict=True) if not isinstance(o, DejaqError)
        ]
        d.settled(done, now + ms)
    else:
        d.settled([id for id, _ in items], None)


def _done(outcomes: list[Outcome]) -> int:
    return sum(1 for o in outcomes if not isinstance(o, DejaqError))
