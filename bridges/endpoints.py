"""What a bridge asks of the queues at its two ends.

A source is read through the server's own durable cursor (a Redis Stream's
consumer group, a JetStream durable consumer, a RabbitMQ queue): a message
read and never acknowledged comes again after a restart, so the bridge
acknowledges it at the source only once dejaq has accepted it. A sink
publishes and returns only once the server has confirmed every message of
the call (the XADD reply, the JetStream ack, the publisher confirm), so the
bridge acks a due message in dejaq only after that.

Either end raises ``EndpointDown`` when its server cannot be reached or the
connection broke; the bridge backs off, calls ``open`` again and carries on
from the server's cursor. Any other exception is a bug of the endpoint.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class EndpointDown(ConnectionError):
    """The queue's server is unreachable or the connection broke."""


@dataclass(frozen=True, slots=True)
class Inbound:
    """A message read from a source and not yet acknowledged there.

    ``fields`` are the message's other fields (a stream entry's fields other
    than ``payload``, a NATS message's headers, an AMQP message's headers and
    properties), as text. ``source_id`` is the source's own id of it, stable
    across redeliveries (stream entry id, JetStream stream sequence, AMQP
    message-id). ``token`` is what the source needs to acknowledge it.
    """

    payload: bytes
    fields: Mapping[str, str]
    source_id: str
    token: object = None


@dataclass(frozen=True, slots=True)
class Outbound:
    """A due message for a sink: its payload, and its fields (its headers,
    with ``id`` and ``due_ms``) as the sink's entry fields or headers."""

    payload: bytes
    fields: Mapping[str, str]


class Source(abc.ABC):
    @abc.abstractmethod
    async def open(self) -> None:
        """Connect, and create the consumer group / durable / queue binding
        where the options ask for it. Called again after ``EndpointDown``."""

    @abc.abstractmethod
    async def read(self, limit: int, wait_ms: int) -> Sequence[Inbound]:
        """At most ``limit`` messages, waiting up to ``wait_ms`` for the first;
        an empty sequence when none came. Messages read before a restart and
        never acknowledged come first."""

    @abc.abstractmethod
    async def ack(self, messages: Sequence[Inbound]) -> None:
        """Acknowledge ``messages`` at the source, for good."""

    @abc.abstractmethod
    async def lag(self) -> int | None:
        """Messages waiting at the source that the bridge has not read yet;
        None where the server cannot say."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release the connection; unacknowledged messages stay at the source."""


class Sink(abc.ABC):
    # How many batches ``send`` may have awaiting their confirms at once.
    window = 1

    @abc.abstractmethod
    async def open(self) -> None:
        """Connect. Called again after ``EndpointDown``."""

    @abc.abstractmethod
    async def publish(self, messages: Sequence[Outbound]) -> None:
        """Publish ``messages`` in their order; return once the server has
        confirmed each of them. On an exception none of them counts as
        published (some may have been: the ids absorb the duplicates)."""

    async def send(self, messages: Sequence[Outbound]) -> asyncio.Future[None]:
        """Publish ``messages`` in their order, after those of the calls
        before; return once they are on their way, with what resolves once
        the server confirmed each of them (or fails as ``publish`` does).
        Without a ``window`` above 1: ``publish``, already resolved."""
        await self.publish(messages)
        sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        sent.set_result(None)
        return sent

    @abc.abstractmethod
    async def close(self) -> None:
        """Release the connection."""
