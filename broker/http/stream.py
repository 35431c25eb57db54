"""Consuming over HTTP as Server-Sent Events: ``GET /v1/topics/{topic}/deliveries``.

A stream is a receiver of the topic's dispatcher for as long as the connection
lasts, like a Consume stream: ``credits`` deliveries unsettled at most. Each
delivery is one ``delivery`` event (the JSON of a lease answer's delivery, with
its lease token); an ack or nack of a stream's token returns its credit (an
extend does not: the message is still held). The stream leases under an owner
of its own; one that ends keeps its leases until they run out (its client may
still ack), and what the dispatcher held for it, never sent, goes back at once.
A comment every ``KEEPALIVE_S`` keeps proxies from closing a quiet stream and
finds a client that left.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from dejaq.broker.api import validation
from dejaq.broker.http import pull, schemas
from dejaq.broker.http.route import Surface, problem_responses
from dejaq.broker.security.identity import CALLER, lease_owner
from dejaq.core.errors import DejaqError, InvalidArgument
from dejaq.core.model import LeasedMessage, Leases, Topic
from dejaq.core.wire.status import code_for

KEEPALIVE_S = 5.0
MAX_CREDITS = 1000


class StreamReceiver:
    """One SSE stream, as the dispatcher sees it."""

    def __init__(
        self, owner: str, lease_ms: int, credit: int, lease_ahead_ms: int, poke: Callable[[], None]
    ) -> None:
        self.consumer_id = owner
        self.lease_ms = lease_ms
        self.credit = credit
        self.ahead_ms = 0
        self.lease_ahead_ms = lease_ahead_ms
        self.answers_once = False  # a stream lasts
        self.poke = poke
        self.queue: asyncio.Queue[tuple[LeasedMessage, int] | Exception] = asyncio.Queue()

    def deliver(self, leases: Leases) -> None:
        for m in leases.delivered:
            self.queue.put_nowait((m, leases.lease_until))

    def fail(self, exc: Exception) -> None:
        self.queue.put_nowait(exc)

    def returned(self, n: int) -> None:
        """``n`` of its deliveries were acked or nacked: credit to lease more."""
        if n:
            self.credit += n
            self.poke()


def _query_int(request: web.Request, name: str, low: int, high: int, default: int) -> int:
    text = request.query.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgument(f"{name} must be an integer from {low} to {high}") from None
    if not low <= value <= high:
        raise InvalidArgument(f"{name} must be an integer from {low} to {high}")
    return value


def deliveries(surface: Surface) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        caller, topic = await pull.topic_for(surface, request)
        unknown = sorted(set(request.query) - {"credits", "lease_ms"})
        if unknown:
            raise InvalidArgument(f"query: unknown parameter {unknown[0]!r}")
        credits = _query_int(request, "credits", 1, MAX_CREDITS, 10)
        lease_ms = validation.lease_ms(
            _query_int(request, "lease_ms", 0, validation.MAX_LEASE_MS, topic.settings.lease_ms)
        )
        broker = surface.broker
        refusal = broker.not_serving()
        if refusal is not None:
            raise refusal
        bound = CALLER.set(caller)
        try:
            owner = lease_owner("sse-" + broker.new_id())
        finally:
            CALLER.reset(bound)
        dispatcher = broker.dispatcher(topic)
        receiver = StreamReceiver(owner, lease_ms, credits, broker.send_ahead_ms, dispatcher.poke)
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(request)
        await _serve(surface, topic, receiver, request, response)
        return response

    return handle


async def _serve(
    surface: Surface,
    topic: Topic,
    receiver: StreamReceiver,
    request: web.Request,
    response: web.StreamResponse,
) -> None:
    broker = surface.broker
    dispatcher = broker.dispatcher(topic)
    key = (topic.name, receiver.consumer_id)
    pull.credit_returns[receiver.consumer_id] = receiver.returned
    await broker.coordinator.consumer_joined(*key)
    dispatcher.add(receiver)
    try:
        while request.transport is not None and not request.transport.is_closing():
            try:
                item = await asyncio.wait_for(receiver.queue.get(), KEEPALIVE_S)
            except TimeoutError:
                await response.write(b": keep-alive\n\n")
                continue
            if isinstance(item, Exception):
                await response.write(_event("error", _problem(item)))
                return
            m, until = item
            doc = pull.delivery(surface.tokens, topic.name, receiver.consumer_id, m, until)
            await response.write(_event("delivery", doc, m.id))
    except ConnectionError:
        pass  # the client left: its leases run out (it may still ack)
    finally:
        pull.credit_returns.pop(receiver.consumer_id, None)
        held = dispatcher.remove(receiver)
        while not receiver.queue.empty():  # delivered here, never written out
            item = receiver.queue.get_nowait()
            if not isinstance(item, Exception):
                held.append(item[0])
        if held:
            pull.cleanup.spawn(dispatcher.hand_back(receiver.consumer_id, held))
        pull.cleanup.spawn(broker.coordinator.consumer_left(*key))


def _problem(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, DejaqError):
        return {"code": code_for(exc).name, "detail": str(exc)}
    return {"code": "INTERNAL", "detail": "internal error"}


def _event(kind: str, doc: dict[str, Any], id: str = "") -> bytes:
    head = f"event: {kind}\n" + (f"id: {id}\n" if id else "")
    return (head + f"data: {json.dumps(doc)}\n\n").encode()


class StreamRoute:
    """The SSE route: a query, and an event stream for an answer."""

    path = "/v1/topics/{topic}/deliveries"
    method = "GET"
    rpc = "Deliveries"

    def serve(self, surface: Surface) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        return deliveries(surface)

    def operation(self) -> dict[str, Any]:
        return {
            "operationId": self.rpc,
            "summary": "Deliveries as Server-Sent Events (one `delivery` event each, its data"
            " a lease answer's delivery), at most `credits` unsettled: an ack or nack of"
            " the stream's tokens returns credit",
            "tags": ["consume"],
            "parameters": [
                {"name": "topic", "in": "path", "required": True, "schema": schemas.TOPIC_NAME},
                {
                    "name": "credits",
                    "in": "query",
                    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_CREDITS},
                },
                {
                    "name": "lease_ms",
                    "in": "query",
                    "schema": {
                        "type": "integer",
                        "minimum": validation.MIN_LEASE_MS,
                        "maximum": validation.MAX_LEASE_MS,
                    },
                },
            ],
            "responses": {
                "200": {
                    "description": "the stream, until the client leaves",
                    "content": {"text/event-stream": {"schema": {"type": "string"}}},
                },
                **problem_responses(),
            },
        }


ROUTES = [StreamRoute()]
