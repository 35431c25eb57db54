"""The Consume stream: one consumer session.

The first frame is a Hello (topic, consumer id, lease, initial credit). Then a
reader task applies credits as they come and settles (ack / extend / nack) in
order, those that arrive while storage works grouped (``settle_groups``),
while the dispatcher pushes DeliveryBatch frames (cut at ``max_frame_bytes``)
through the session's bounded outbox (``dispatch/outbox.py``).

A consumer that says Goodbye is leaving cleanly: its leases are released at
once (due now, for another consumer). One whose stream ends or breaks without
it keeps its leases until they expire: it may still be working and come back
to ack. (grpc.aio ends the request stream the same way for a half-close and
for a client that died, so only an explicit frame can tell them apart.)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import grpc

from dejaq.broker.api import validation
from dejaq.broker.api.settle_groups import SettleGroups
from dejaq.broker.context import BrokerContext
from dejaq.broker.dispatch.dispatcher import Dispatcher
from dejaq.broker.dispatch.held import HeldBytes
from dejaq.broker.dispatch.outbox import Outbox
from dejaq.broker.security.identity import consumer_id_of, lease_owner
from dejaq.broker.tasks import Background
from dejaq.core.errors import AlreadyExists, DejaqError, InvalidArgument
from dejaq.core.model import LeasedMessage, Leases, Topic
from dejaq.core.wire.batches import delivery_frames
from dejaq.core.wire.convert import topic_to_pb
from dejaq.proto import dejaq_pb2 as pb

log = logging.getLogger(__name__)
_cleanup = Background("consumer cleanup")
HELLO_TIMEOUT_S = 30.0
MAX_WINDOW = 10 * validation.MAX_CREDITS

CutOff = Callable[[DejaqError], Coroutine[Any, Any, None]]  # ends the call with a status at once


class Session:
    """A connected consumer, as the dispatcher sees it.

    ``ahead_ms``: how early the dispatcher may send it a delivery, because the
    consumer holds each until it is due by the broker's clock (``Hello.hold_ms``,
    capped by ``--send-ahead-ms``); 0 = the broker sends each at its millisecond.
    Every delivery frame says when, by that clock, it left (``sent_at``)."""

    def __init__(
        self,
        topic: Topic,
        consumer_id: str,
        lease_ms: int,
        credit: int,
        max_frame_bytes: int,
        max_outbox_frames: int,
        ahead_ms: int = 0,
        held: HeldBytes | None = None,
    ) -> None:
        self.topic = topic
        self.consumer_id = consumer_id
        self.lease_ms = lease_ms
        self.credit = credit
        self.max_frame_bytes = max_frame_bytes
        self.outbox = Outbox(consumer_id, max_outbox_frames, held)
        self.ahead_ms = ahead_ms
        self.lease_ahead_ms = 0  # the broker's look-ahead only
        self.answers_once = False

    def deliver(self, leases: Leases) -> None:
        """A pass's deliveries, in frames of at most ``max_frame_bytes``."""
        for frame, carries in delivery_frames(
            leases.delivered, leases.lease_until, self.max_frame_bytes, self.topic
        ):
            # Held until sent: the frame, and the messages it carries (kept to
            # hand back), whose payloads storage may have copied.
            size = len(frame) + sum(map(len, carries.payloads))
            self.outbox.put(pb.ConsumeResponse(deliveries=frame), carries, leases.lease_until, size)

    def fail(self, exc: Exception) -> None:
        self.outbox.fail(exc)


async def consume_stream(
    broker: BrokerContext,
    requests: AsyncIterator[pb.ConsumeRequest],
    cut_off: CutOff | None = None,
) -> AsyncIterator[pb.ConsumeResponse]:
    """One consumer's stream. ``cut_off`` ends the call with a status even while
    a write waits on a consumer that does not read (``dispatch/outbox.py``)."""
    async with broker.streams.slot(requests):
        async for response in _consume(broker, requests, cut_off):
            yield response


async def _consume(
    broker: BrokerContext, requests: AsyncIterator[pb.ConsumeRequest], cut_off: CutOff | None
) -> AsyncIterator[pb.ConsumeResponse]:
    try:
        first = await asyncio.wait_for(anext(requests), HELLO_TIMEOUT_S)
    except (StopAsyncIteration, TimeoutError):
        raise InvalidArgument("a Consume stream must open with a Hello frame") from None
    if first.WhichOneof("frame") != "hello":
        raise InvalidArgument("a Consume stream must open with a Hello frame")
    session = await _open(broker, first.hello)
    refusal = broker.not_serving()
    if refusal is not None:
        raise refusal
    dispatcher = broker.dispatcher(session.topic)

    def cut(exc: DejaqError) -> None:
        log.warning("%s: %s", session.topic.name, exc)
        broker.metrics.consumers_cut_off.inc()
        held = _withdraw(broker, dispatcher, session)
        if held:
            _cleanup.spawn(dispatcher.hand_back(session.consumer_id, held))
        if cut_off is not None:
            _cleanup.spawn(cut_off(exc))

    session.outbox.on_cut_off = cut
    key = (session.topic.name, session.consumer_id)
    broker.consumer_ids.add(key)
    broker.consumer_streams.add(session)  # ended from outside if the broker stops serving
    reader: asyncio.Task[None] | None = None
    try:
        await broker.coordinator.consumer_joined(*key)
        yield pb.ConsumeResponse(
            welcome=pb.Welcome(
                consumer_id=consumer_id_of(session.consumer_id),
                lease_ms=session.lease_ms,
                topic=topic_to_pb(session.topic),
            )
        )
        dispatcher.add(session)
        reader = asyncio.create_task(_read(broker, session, dispatcher, requests))
        frames_out = broker.metrics.frame_counter("consume", "out")
        clock = broker.clock
        while (item := await session.outbox.get()) is not None:
            frames_out.inc()
            if item.WhichOneof("frame") == "deliveries":  # (reading the bytes would copy them)
                # Stamped as it leaves, not when it was made: the closer to the
                # consumer's reading, the sooner a held message may go.
                item.sent_at = clock.now_ms()
            yield item
    finally:
        if reader is not None:
            reader.cancel()
        held = _withdraw(broker, dispatcher, session)
        broker.consumer_ids.discard(key)
        broker.consumer_streams.discard(session)
        # Cleanup must not await here: this may run while the stream is cancelled.
        if held:
            _cleanup.spawn(dispatcher.hand_back(session.consumer_id, held))
        _cleanup.spawn(broker.coordinator.consumer_left(*key))


async def _open(broker: BrokerContext, hello: pb.Hello) -> Session:
    topic = await broker.topics.get(hello.topic)
    # The session's id is the lease owner: the caller's principal and its consumer id.
    cid = lease_owner(
        validation.consumer_id(hello.consumer_id) if hello.consumer_id else broker.new_id()
    )
    if (topic.name, cid) in broker.consumer_ids:
        raise AlreadyExists(f"consumer {cid!r} is already connected to topic {topic.name!r}")
    lease = validation.lease_ms(hello.lease_ms or topic.settings.lease_ms)
    config = broker.config
    return Session(
        topic,
        cid,
        lease,
        validation.credits(hello.credits),
        config.max_frame_bytes,
        config.max_outbox_frames,
        min(hello.hold_ms, broker.send_ahead_ms),
        broker.held,
    )


async def _read(
    broker: BrokerContext,
    session: Session,
    dispatcher: Dispatcher,
    requests: AsyncIterator[pb.ConsumeRequest],
) -> None:
    """Apply the consumer's frames; its settles in groups (``settle_groups``),
    every one received applied before the stream ends (not when cancelled)."""
    settles = SettleGroups(
        broker,
        session.topic,
        session.consumer_id,
        lambda result: session.outbox.put(pb.ConsumeResponse(settled=result)),
        session.fail,
    )
    try:
        ended = await _frames(broker, session, dispatcher, requests, settles)
        await settles.drain()
    finally:
        await settles.close()
    if ended:  # without a goodbye: end our side too, keep the leases until they expire
        session.outbox.end()


async def _frames(
    broker: BrokerContext,
    session: Session,
    dispatcher: Dispatcher,
    requests: AsyncIterator[pb.ConsumeRequest],
    settles: SettleGroups,
) -> bool:
    """Read the stream to its end: True when it ended without a goodbye (or broke)."""
    frames_in = broker.metrics.frame_counter("consume", "in")
    try:
        async for req in requests:
            frames_in.inc()
            kind = req.WhichOneof("frame")
            if kind == "credits":
                _add_credits(session, dispatcher, validation.credits(req.credits))
            elif kind == "settle":
                if req.settle.credits:
                    _add_credits(session, dispatcher, req.settle.credits)
                await settles.put(req.settle)
            elif kind == "goodbye":
                await settles.drain()  # its settles before its leases are released
                await _goodbye(broker, session, dispatcher, len(req.goodbye.keep))
                return False
            elif kind == "hello":
                raise InvalidArgument("Hello may only open the stream")
            else:
                raise InvalidArgument("empty Consume frame")
    except DejaqError as exc:
        session.fail(exc)
        return False
    except (grpc.RpcError, ConnectionError):
        pass
    return True


def _withdraw(
    broker: BrokerContext, dispatcher: Dispatcher, session: Session
) -> list[LeasedMessage]:
    """Stop dispatching to ``session``: the messages leased to it that it never
    got (held in the window, or queued in its outbox), to hand back."""
    return dispatcher.remove(session) + session.outbox.take_deliveries(broker.clock.now_ms())


def _add_credits(session: Session, dispatcher: Dispatcher, n: int) -> None:
    """Credit returned (with acks, mostly) wakes the dispatcher, also when the
    session still had some: under load passes then follow the acks, in small
    frames. (Waking only on a session's first credit halved the frames and
    broke 40k/s on memory: p99 14-64 ms against 6.)"""
    session.credit += n
    if session.credit > MAX_WINDOW:
        raise InvalidArgument(f"credit window over {MAX_WINDOW} messages")
    dispatcher.poke()


async def _goodbye(
    broker: BrokerContext, session: Session, dispatcher: Dispatcher, in_hand: int
) -> None:
    """Stop dispatching to the consumer first, then hand its leases back: the ones
    held for it or queued and never sent at their own time, then the rest due now,
    unless it still processes some (``in_hand``): then the rest run out at their own
    time, so no message whose ack may still come goes to another consumer."""
    held = _withdraw(broker, dispatcher, session)
    await dispatcher.hand_back(session.consumer_id, held)
    if in_hand:
        log.info(
            "consumer %s left %s still processing %d deliveries: its leases run out",
            session.consumer_id,
            session.topic.name,
            in_hand,
        )
        session.outbox.end()
        return
    released = await broker.storage.release(
        session.topic.name, session.consumer_id, broker.clock.now_ms()
    )
    if released:
        dispatcher.hint(0)
        log.info(
            "consumer %s left %s, released %d leases",
            session.consumer_id,
            session.topic.name,
            released,
        )
    session.outbox.end()
