"""Consuming over HTTP: lease with a long poll, then ack, nack or extend by
lease token (``lease_tokens.py``).

A lease request registers a short-lived receiver with the topic's dispatcher,
as a Consume stream's session does: it gets the same round-robin turn among
the topic's consumers (HTTP and gRPC alike), at most ``max`` messages, and
the same lease, max deliveries and dead timeline. It answers as soon as it is
handed anything, or after ``wait_ms`` with none. It looks as far ahead as a
gRPC consumer is sent messages, but is leased ahead only its first message and
what shares its millisecond (``answers_once``), handed over at that
millisecond from the dispatcher's window (never early): several requests
waiting each hold the next message in turn, none holds messages it will not
answer with. Each request
leases under an owner of its own, so a token from a lease that ran out cannot
settle the message once another request leased it again. Messages taken for
the request and never answered (it timed out first, or the client left) are
handed back at once; a client that stops polling holds nothing past its leases.

For the bucket assignment a principal's requests count as one consumer of the
topic, registered while they wait and for ``REGISTRATION_LINGER_S`` after the
last one answered: a worker polls again within that, so the cluster does not
hand the topic's buckets away and back between two polls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web

from dejaq.broker.api import validation
from dejaq.broker.api.settle import Kind, settle
from dejaq.broker.context import BrokerContext
from dejaq.broker.http import codec, schemas
from dejaq.broker.http.auth import caller_of
from dejaq.broker.http.lease_tokens import LeaseToken, Signer
from dejaq.broker.http.route import (
    Surface,
    json_body,
    json_response,
    problem_responses,
    read_json,
)
from dejaq.broker.security.identity import CALLER, OWNER_SEPARATOR, Caller, lease_owner
from dejaq.broker.security.policy import Permission
from dejaq.broker.tasks import Background
from dejaq.core import headers as header_codec
from dejaq.core.errors import DejaqError, InvalidArgument
from dejaq.core.model import LeasedMessage, Leases, Topic
from dejaq.core.wire.status import code_for

MAX_MESSAGES = 1000
MAX_WAIT_MS = 20_000
# The least a lease waits (wait_ms 0 too): time for the dispatcher's pass, woken
# by the request joining, to lease what is due already.
MIN_WAIT_MS = 20
MAX_TOKENS = 1000
REGISTRATION_LINGER_S = 2.0
cleanup = Background("HTTP lease cleanup")
# Open event streams by lease owner (``stream.py``): an ack or nack of a
# stream's token gives the stream its credit back.
credit_returns: dict[str, Callable[[int], None]] = {}


class PullReceiver:
    """One lease request, as the dispatcher sees it: credit for ``max`` messages,
    looking as far ahead as a gRPC consumer is sent them (``lease_ahead_ms``: so
    neither kind takes the other's turn by looking further), answered once
    (``answers_once``), and handed over by the dispatcher's window at their
    millisecond, never early."""

    def __init__(
        self, owner: str, lease_ms: int, credit: int, lease_ahead_ms: int, registered_as: str
    ) -> None:
        self.consumer_id = owner
        self.registered_as = registered_as
        self.lease_ms = lease_ms
        self.credit = credit
        self.ahead_ms = 0
        self.lease_ahead_ms = lease_ahead_ms
        self.answers_once = True
        self.taken: list[tuple[LeasedMessage, int]] = []  # (message, lease until)
        self.failed: Exception | None = None
        self.ready = asyncio.Event()

    def deliver(self, leases: Leases) -> None:
        self.taken.extend((m, leases.lease_until) for m in leases.delivered)
        if self.taken:
            self.ready.set()

    def fail(self, exc: Exception) -> None:
        self.failed = exc
        self.ready.set()


def _bounded(doc: dict[str, Any], name: str, low: int, high: int, default: int) -> int:
    value = doc.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be an integer from {low} to {high}")
    return value


def _object(doc: Any, allowed: set[str]) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise InvalidArgument("the body must be a JSON object")
    unknown = sorted(set(doc) - allowed)
    if unknown:
        raise InvalidArgument(f"unknown field {unknown[0]!r}")
    return doc


async def topic_for(surface: Surface, request: web.Request) -> tuple[Caller, Topic]:
    caller = caller_of(surface.guard, request)
    name = validation.topic_name(request.match_info["topic"])
    if surface.guard.policy is not None:
        surface.guard.authorize(caller, Permission.CONSUME, name)
    return caller, await surface.broker.topics.get(name)


def lease(surface: Surface) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        caller, topic = await topic_for(surface, request)
        doc = _object(await read_json(request), {"max", "wait_ms", "lease_ms"})
        most = _bounded(doc, "max", 1, MAX_MESSAGES, 1)
        wait_ms = _bounded(doc, "wait_ms", 0, MAX_WAIT_MS, 0)
        lease_ms = doc.get("lease_ms", topic.settings.lease_ms)
        if isinstance(lease_ms, bool) or not isinstance(lease_ms, int):
            raise InvalidArgument("lease_ms must be an integer")
        validation.lease_ms(lease_ms)
        broker = surface.broker
        refusal = broker.not_serving()
        if refusal is not None:
            raise refusal
        bound = CALLER.set(caller)
        try:
            owner = lease_owner("http-" + broker.new_id())
            registered_as = lease_owner("http")
        finally:
            CALLER.reset(bound)
        receiver = PullReceiver(owner, lease_ms, most, broker.send_ahead_ms, registered_as)
        taken = await _take(broker, topic, receiver, wait_ms, request)
        deliveries = [delivery(surface.tokens, topic.name, owner, m, until) for m, until in taken]
        broker.metrics.http_request("Lease", grpc.StatusCode.OK)
        return json_response({"deliveries": deliveries})

    return handle


async def _take(
    broker: BrokerContext,
    topic: Topic,
    receiver: PullReceiver,
    wait_ms: int,
    request: web.Request,
) -> list[tuple[LeasedMessage, int]]:
    """What the dispatcher delivers to ``receiver`` within ``wait_ms``."""
    dispatcher = broker.dispatcher(topic)
    # Counted for the bucket assignment as one consumer per principal, however
    # many of its requests wait (each still leases under an owner of its own).
    key = (topic.name, receiver.registered_as)
    await broker.coordinator.consumer_joined(*key)
    dispatcher.add(receiver)
    answered = False
    try:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(receiver.ready.wait(), max(wait_ms, MIN_WAIT_MS) / 1000)
        if receiver.failed is not None:
            raise receiver.failed
        # A client that left while it waited gets nothing: what it took goes back.
        answered = not _left(request)
        return receiver.taken if answered else []
    finally:
        # Cleanup must not await here: this may run while the request is cancelled.
        held = dispatcher.remove(receiver)
        if not answered:  # the client left, or the pass failed: nobody gets these
            held += [m for m, _ in receiver.taken]
        if held:
            cleanup.spawn(dispatcher.hand_back(receiver.consumer_id, held))
        cleanup.spawn(_leave_later(broker, key))


async def _leave_later(broker: BrokerContext, key: tuple[str, str]) -> None:
    """Unregister one request's join, once the linger is over."""
    await asyncio.sleep(REGISTRATION_LINGER_S)
    await broker.coordinator.consumer_left(*key)


def _left(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


def delivery(
    tokens: Signer, topic: str, owner: str, m: LeasedMessage, until: int
) -> dict[str, Any]:
    token = tokens.issue(LeaseToken(topic, m.id, m.version, owner))
    return {
        "id": m.id,
        "timestamp_ms": m.timestamp,
        **codec.bytes_to_json("payload", m.payload),
        "key": m.key,
        "headers": header_codec.decode(m.headers) if m.headers else {},
        "deliveries": m.deliveries,
        "lease_until_ms": until,
        "lease_token": token,
    }


def settler(kind: Kind) -> Callable[[Surface], Callable[[web.Request], Awaitable[web.Response]]]:
    ms_field = {Kind.ACK: None, Kind.NACK: "delay_ms", Kind.EXTEND: "lease_ms"}[kind]

    def serve(surface: Surface) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            caller, topic = await topic_for(surface, request)
            allowed = {"lease_tokens"} | ({ms_field} if ms_field else set())
            doc = _object(await read_json(request), allowed)
            tokens = doc.get("lease_tokens")
            if (
                not isinstance(tokens, list)
                or not 1 <= len(tokens) <= MAX_TOKENS
                or not all(isinstance(t, str) and t for t in tokens)
            ):
                raise InvalidArgument(
                    f"lease_tokens must be a list of 1 to {MAX_TOKENS} tokens (strings)"
                )
            ms = 0
            if kind is Kind.EXTEND:
                ms = validation.lease_ms(
                    _bounded(doc, "lease_ms", 0, 1 << 62, topic.settings.lease_ms)
                )
            elif kind is Kind.NACK:
                ms = validation.delay_ms(_bounded(doc, "delay_ms", 0, 1 << 62, 0))
            results = await _settle_tokens(surface, caller, topic, kind, tokens, ms)
            surface.broker.metrics.http_request(kind.name.title(), grpc.StatusCode.OK)
            return json_response({"results": results})

        return handle

    return serve


async def _settle_tokens(
    surface: Surface, caller: Caller, topic: Topic, kind: Kind, tokens: list[str], ms: int
) -> list[dict[str, Any]]:
    """One outcome per token, in order: the tokens of one lease request settled
    in one storage call (they share its owner)."""
    broker = surface.broker
    results: list[dict[str, Any]] = [{} for _ in tokens]
    groups: dict[str, list[tuple[int, LeaseToken]]] = {}
    for i, text in enumerate(tokens):
        try:
            token = _check(surface.tokens, text, caller, topic.name)
        except DejaqError as exc:
            results[i] = _refused(text, exc)
            continue
        groups.setdefault(token.owner, []).append((i, token))
    for owner, group in groups.items():
        items = [(t.id, t.version) for _, t in group]
        try:
            outcomes = await settle(broker, topic, kind, items, owner, ms)
        except DejaqError as exc:
            outcomes = [exc] * len(items)
        back = credit_returns.get(owner)
        if back is not None and kind is not Kind.EXTEND:  # leases ended: credit to their stream
            back(sum(1 for o in outcomes if not isinstance(o, DejaqError)))
        for (i, t), outcome in zip(group, outcomes, strict=True):
            if isinstance(outcome, DejaqError):
                results[i] = _refused(tokens[i], outcome)
            else:
                results[i] = {"lease_token": tokens[i], "id": t.id, "ok": True,
                              "version": outcome.version}  # fmt: skip
                if kind is Kind.EXTEND:  # an extend moves the version on: quote the new one
                    renewed = LeaseToken(t.topic, t.id, outcome.version, owner)
                    results[i]["renewed_lease_token"] = surface.tokens.issue(renewed)
    return results


def _check(tokens: Signer, text: str, caller: Caller, topic: str) -> LeaseToken:
    token = tokens.check(text)
    if token.topic != topic:
        raise InvalidArgument(f"the lease token is for topic {token.topic!r}, not {topic!r}")
    principal = token.owner.rpartition(OWNER_SEPARATOR)[0] if OWNER_SEPARATOR in token.owner else ""
    if principal != ("" if caller.anonymous else caller.principal):
        raise InvalidArgument("the lease token was issued to another principal")
    return token


def _refused(text: str, exc: DejaqError) -> dict[str, Any]:
    return {
        "lease_token": text,
        "ok": False,
        "code": code_for(exc).name,
        "kind": type(exc).__name__,
        "detail": str(exc),
    }


TOKENS = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
          "maxItems": MAX_TOKENS}  # fmt: skip
LEASE_BODY = {
    "type": "object",
    "properties": {
        "max": {"type": "integer", "minimum": 1, "maximum": MAX_MESSAGES,
                "description": "the most deliveries to answer (default 1)"},
        "wait_ms": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_MS,
                    "description": "how long to wait for a message to come due (default 0:"
                                   " what is due already)"},
        "lease_ms": {"type": "integer", "minimum": validation.MIN_LEASE_MS,
                     "maximum": validation.MAX_LEASE_MS,
                     "description": "the lease (default: the topic's)"},
    },
    "additionalProperties": False,
}  # fmt: skip
DELIVERY = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "timestamp_ms": {"type": "integer", "description": "the due time"},
        "payload": {"type": "string", "description": "the payload, when it is UTF-8"},
        "payload_base64": {"type": "string", "description": "the payload, when it is not"},
        "key": {"type": "string"},
        "headers": {"type": "object", "additionalProperties": {"type": "string"}},
        "deliveries": {"type": "integer", "minimum": 1},
        "lease_until_ms": {"type": "integer"},
        "lease_token": {"type": "string", "description": "quote it to ack, nack or extend"},
    },
    "required": ["id", "timestamp_ms", "key", "headers", "deliveries", "lease_until_ms",
                 "lease_token"],
}  # fmt: skip
LEASED = {
    "type": "object",
    "properties": {"deliveries": {"type": "array", "items": DELIVERY}},
    "required": ["deliveries"],
}
RESULT = {
    "type": "object",
    "properties": {
        "lease_token": {"type": "string"},
        "ok": {"type": "boolean"},
        "id": {"type": "string"},
        "version": {"type": "integer", "description": "0: the message is gone (acked, dead)"},
        "code": {"type": "string"},
        "kind": {"type": "string"},
        "detail": {"type": "string"},
        "renewed_lease_token": {
            "type": "string",
            "description": "extend: the token to quote from now on",
        },
    },
    "required": ["lease_token", "ok"],
}
RESULTS = {
    "type": "object",
    "properties": {"results": {"type": "array", "items": RESULT}},
    "required": ["results"],
}


def _settle_body(extra: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"lease_tokens": TOKENS, **extra},
        "required": ["lease_tokens"],
        "additionalProperties": False,
    }


@dataclass(frozen=True)
class PullRoute:
    """A route of the pull API: its own JSON body and answer."""

    path: str
    serve: Callable[[Surface], Callable[[web.Request], Awaitable[web.Response]]]
    rpc: str  # its metrics label (the consume permission applies)
    body: dict[str, Any]
    answer: dict[str, Any]
    summary: str
    method: str = "POST"

    def operation(self) -> dict[str, Any]:
        return {
            "operationId": self.rpc,
            "summary": self.summary,
            "tags": ["consume"],
            "parameters": [
                {"name": "topic", "in": "path", "required": True, "schema": schemas.TOPIC_NAME}
            ],
            "requestBody": {
                "required": False,
                "content": {"application/json": {"schema": self.body}},
            },
            "responses": {"200": json_body(self.answer, "done"), **problem_responses()},
        }


TOPIC = "/v1/topics/{topic}"
ROUTES = [
    PullRoute(
        TOPIC + "/lease", lease, "Lease", LEASE_BODY, LEASED,
        "Lease up to max due messages: answered as soon as any is due, or after wait_ms"
        " (at most 20 s) with none",
    ),
    PullRoute(
        TOPIC + "/ack", settler(Kind.ACK), "Ack", _settle_body({}), RESULTS,
        "Acknowledge leased messages by lease token (an outcome per token)",
    ),
    PullRoute(
        TOPIC + "/nack", settler(Kind.NACK), "Nack",
        _settle_body({"delay_ms": {"type": "integer", "minimum": 0}}), RESULTS,
        "Give leased messages back, due again after delay_ms (or dead past max deliveries)",
    ),
    PullRoute(
        TOPIC + "/extend", settler(Kind.EXTEND), "Extend",
        _settle_body({"lease_ms": {"type": "integer", "minimum": validation.MIN_LEASE_MS,
                                   "maximum": validation.MAX_LEASE_MS}}),
        RESULTS, "Extend leases to lease_ms from now",
    ),
]  # fmt: skip
