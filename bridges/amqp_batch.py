"""Publishing a batch on an aiormq channel: its frames in one write, then the
server's publisher confirms awaited together.

aiormq's ``basic_publish`` holds the channel's lock until a message's frames
are written, so a batch published through it costs an event-loop round and a
socket write a message, and a task a message to await their confirms
together. Here a batch's frames go to the connection's writer as one buffer,
under the channel's lock, with the channel's own confirm bookkeeping: the
delivery tag each message takes, its confirmation future (which the channel's
reader settles on ``basic.ack``, ``basic.nack`` or ``basic.return``), and the
``message_id`` a return is matched by. That bookkeeping is aiormq 7's
(``pyproject.toml`` bounds the version); ``tests/bridges/test_amqp_batch.py``
pins it against a real server.

``confirm_in_order`` settles a ``basic.ack`` with ``multiple`` in the time of
the publishes it confirms: aiormq's own looks at every publish awaiting its
confirm for each such ack, and schedules a call for each one it covers again
on every ack until that call ran, which with thousands in flight (a bridge
catching up) costs more than the publishes.
"""

from __future__ import annotations

import asyncio
import types
import uuid
from collections.abc import Sequence

import aiormq
import aiormq.abc
from pamqp import commands as spec
from pamqp.body import ContentBody
from pamqp.header import ContentHeader

# A message to publish: its body and its properties.
Message = tuple[bytes, spec.Basic.Properties]


def properties(
    headers: dict[str, str], message_id: str | None, *, persistent: bool
) -> spec.Basic.Properties:
    """A message's properties; without a ``message_id`` it takes a random one,
    as aiormq gives every publish (a ``basic.return`` is matched by it)."""
    return spec.Basic.Properties(
        headers=headers,  # type: ignore[arg-type]
        message_id=message_id or uuid.uuid4().hex,
        delivery_mode=2 if persistent else 1,
    )


def _bodies(body: bytes, largest: int) -> list[ContentBody]:
    return [ContentBody(body[at : at + largest]) for at in range(0, len(body), largest)]


async def publish(
    channel: aiormq.abc.AbstractChannel,
    exchange: str,
    routing_key: str,
    messages: Sequence[Message],
    *,
    mandatory: bool = False,
) -> list[BaseException | None]:
    """Publish ``messages`` in their order; each one's outcome once the
    server answered for all (``send``)."""
    return outcomes(
        await (await send(channel, exchange, routing_key, messages, mandatory=mandatory))
    )


async def send(
    channel: aiormq.abc.AbstractChannel,
    exchange: str,
    routing_key: str,
    messages: Sequence[Message],
    *,
    mandatory: bool = False,
) -> asyncio.Future[list[object]]:
    """Write ``messages`` in their order; once written, what resolves to the
    server's answers for them (``outcomes`` reads them): on a channel in
    confirm mode once it answered for each, without confirms at once. Raises
    when they could not be written (the channel or connection closed)."""
    assert isinstance(channel, aiormq.Channel)
    confirming = channel.publisher_confirms
    if not messages:
        return _answered([])
    frames: list[spec.Basic.Publish | ContentHeader | ContentBody] = []
    confirmations: list[asyncio.Future[object]] = []
    tags: dict[str, int] = {}
    async with channel.lock:
        first = channel.delivery_tag
        try:
            for body, props in messages:
                frames.append(
                    spec.Basic.Publish(
                        exchange=exchange, routing_key=routing_key, mandatory=mandatory
                    )
                )
                frames.append(ContentHeader(properties=props, body_size=len(body)))
                frames.extend(_bodies(body, channel.max_content_size))
                if confirming:
                    channel.delivery_tag += 1
                    confirmation = channel.create_future()
                    channel.confirmations[channel.delivery_tag] = confirmation
                    assert props.message_id is not None
                    channel.message_id_delivery_tag[props.message_id] = channel.delivery_tag
                    tags[props.message_id] = channel.delivery_tag
                    confirmations.append(confirmation)
            written = channel.create_future()
            await channel.write_queue.put(
                aiormq.abc.ChannelFrame.marshall(
                    channel_number=channel.number, frames=frames, drain_future=written
                )
            )
        except BaseException:
            # Not handed to the writer: the server never sees them, so their
            # delivery tags are the next publishes' again.
            for tag in range(first + 1, channel.delivery_tag + 1):
                pending = channel.confirmations.pop(tag, None)
                if isinstance(pending, asyncio.Future):
                    pending.cancel()
            _forget(channel, tags)
            channel.delivery_tag = first
            raise
    try:
        await written
    except BaseException:
        _forget(channel, tags)
        raise
    if not confirming:
        return _answered([None] * len(messages))
    answers = asyncio.gather(*confirmations, return_exceptions=True)
    answers.add_done_callback(lambda _: _forget(channel, tags))
    return answers


def outcomes(answers: Sequence[object]) -> list[BaseException | None]:
    """Each message's outcome from the server's answers: None when confirmed,
    else what aiormq makes of the answer (``PublishError`` returned as
    unroutable, ``DeliveryError`` refused, or why the channel closed)."""
    return [answer if isinstance(answer, BaseException) else None for answer in answers]


def _answered(answers: list[object]) -> asyncio.Future[list[object]]:
    done: asyncio.Future[list[object]] = asyncio.get_running_loop().create_future()
    done.set_result(answers)
    return done


def _forget(channel: aiormq.Channel, tags: dict[str, int]) -> None:
    """Drop the ``message_id`` -> tag entries of these publishes (a later one
    of the same id may have taken its place)."""
    known = channel.message_id_delivery_tag
    for message_id, tag in tags.items():
        if known.get(message_id) == tag:
            del known[message_id]


def confirm_in_order(channel: aiormq.abc.AbstractChannel) -> None:
    """Settle ``channel``'s confirms with ``multiple`` from its oldest
    publish on, up to the tag acknowledged, and no further."""
    assert isinstance(channel, aiormq.Channel)

    async def on_confirm(self: aiormq.Channel, frame: spec.Basic.Ack | spec.Basic.Nack) -> None:
        pending = self.confirmations
        if not getattr(frame, "multiple", False):
            self._confirm_delivery(frame.delivery_tag, frame)
            return
        # Tags go in ascending as they are taken; one a return set aside goes
        # to the back, already answered, and is dropped once passed.
        while pending:
            tag = next(iter(pending))
            if frame.delivery_tag is None or tag > frame.delivery_tag:
                break
            self._confirm_delivery(tag, frame)
            if pending and next(iter(pending)) == tag:  # a guard: it pops what it settles
                break

    channel._on_confirm_frame = types.MethodType(on_confirm, channel)  # type: ignore[method-assign]
