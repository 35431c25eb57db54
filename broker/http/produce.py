"""Produce over HTTP: one message, or a batch up to the broker's produce frame
limits, stored through the gRPC Produce path (``broker/api/produce.py``): the
same checks, dedup by id, bounds and clock.

A batch is one produce frame: refused whole when over ``max_produce_messages``
or ``max_produce_bytes``, else answered message by message (accepted,
duplicate, replaced, extended, leased, or rejected with its reason).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web

from dejaq.broker.api.calls import serve_unary
from dejaq.broker.api.produce import produce, produce_decoded
from dejaq.broker.context import BrokerContext
from dejaq.broker.http import batch_json, codec, schemas
from dejaq.broker.http.auth import caller_of
from dejaq.broker.http.batch_json import NewMessages
from dejaq.broker.http.problems import problem, status_for
from dejaq.broker.http.route import (
    Surface,
    json_body,
    json_response,
    links,
    parse_json,
    problem_responses,
    read_json,
)
from dejaq.broker.security.identity import Caller
from dejaq.core import headers as header_codec
from dejaq.core.errors import InvalidArgument
from dejaq.core.keys import check_key
from dejaq.core.model import MAX_TIMESTAMP, InsertStatus, OnDuplicate
from dejaq.core.wire.batches import (
    ProduceBatch,
    decode_results,
    encode_messages,
    messages_frame_at_most,
)
from dejaq.proto import dejaq_pb2 as pb

F = codec.F
# When a message is due: at a time, or after a delay from the broker's clock.
AT, DELAY = "timestamp_ms", "delay_ms"
KEY, HEADERS = "key", "headers"
# What happens when an id is already waiting: a message's field on the one
# message route, the batch's on the batch route (a produce frame carries one).
ON_DUPLICATE = "on_duplicate"
MODES = [m.label for m in OnDuplicate]
# A message's options, each with its wire type (its range); 0 when not given.
OPTIONS: dict[str, int] = {
    "max_deliveries": F.TYPE_UINT32,
    "expires_at_ms": F.TYPE_INT64,
    "priority": F.TYPE_UINT32,
}
FIELDS: dict[str, int] = {AT: F.TYPE_INT64, **OPTIONS}  # with a wire type of their own
# A delay reaches 9999-12-31 at most (the latest due time, from the broker's clock).
DELAY_RANGE = (0, MAX_TIMESTAMP)
DESCRIPTIONS = {
    AT: "when it is due, ms since the epoch (priority topics: not before);"
    " past or 0: now. Under 1000000000000 (2001-09-09) only 0 is taken: the rest can"
    " only be seconds. Give this or delay_ms",
    DELAY: "due this many ms from now, by the broker's clock (priority topics: not"
    " before); 0: now. Give this or timestamp_ms",
    "max_deliveries": "0: the topic's; 1: at most once",
    "expires_at_ms": "dead-lettered if still undelivered then; 0: the topic's expiry",
    "priority": "priority topics: 0 is the most urgent",
}
CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}
STATUSES = [s.name for s in InsertStatus]


def read_messages(docs: Any, limit: int) -> NewMessages:
    if not isinstance(docs, list):
        raise InvalidArgument("body.messages must be a list")
    if len(docs) > limit:
        raise InvalidArgument(f"a batch carries at most {limit} messages, this one {len(docs)}")
    new = NewMessages([], [], [], {})
    for i, doc in enumerate(docs):
        _read_one(new, doc, f"body.messages[{i}]", i)
    new.drop_empty_extras()
    return new


def _read_one(new: NewMessages, doc: Any, where: str, index: int) -> None:
    if not isinstance(doc, dict):
        raise InvalidArgument(f"{where} must be a JSON object")
    known = {"id", "payload", "payload" + codec.BASE64_SUFFIX, DELAY, KEY, HEADERS, *FIELDS}
    for key in doc:
        if key not in known:
            raise InvalidArgument(f"{where}: unknown field {key!r}")
    mid = doc.get("id", "")
    if not isinstance(mid, str):
        raise InvalidArgument(f"{where}.id must be a string")
    try:
        mid.encode()
    except UnicodeEncodeError as exc:  # a lone surrogate from a \\ud800 escape
        raise InvalidArgument(f"{where}.id is not valid text: {exc.reason}") from None
    new.ids.append(mid)
    if "payload" in doc and "payload_base64" in doc:
        raise InvalidArgument(f"{where}: give payload or payload_base64, not both")
    encoded = "payload_base64" in doc
    raw = doc.get("payload_base64" if encoded else "payload", "")
    new.payloads.append(codec.bytes_from_json(raw, f"{where}.payload", encoded))
    _read_key_and_headers(new, doc, where)
    _read_due(new, doc, where, index)
    for name, kind in OPTIONS.items():
        if name not in doc:
            if name in new.columns:
                new.columns[name].append(0)
            continue
        value = _integer(doc[name], kind, f"{where}.{name}")
        new.columns.setdefault(name, [0] * index).append(value)


def _read_key_and_headers(new: NewMessages, doc: dict[str, Any], where: str) -> None:
    """A message's key and headers, checked (core/keys.py, core/headers.py); a
    bad one refuses the request, naming the field."""
    key = doc.get(KEY, "")
    if not isinstance(key, str):
        raise InvalidArgument(f"{where}.{KEY} must be a string")
    try:
        new.keys.append(check_key(key))
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}.{KEY}: {exc}") from None
    headers = doc.get(HEADERS, {})
    if not isinstance(headers, dict):
        raise InvalidArgument(f"{where}.{HEADERS} must be a JSON object of strings")
    try:
        new.headers.append(header_codec.encode(header_codec.check_headers(headers)))
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}.{HEADERS}: {exc}") from None


def _read_due(new: NewMessages, doc: dict[str, Any], where: str, index: int) -> None:
    """A message's due time, or its delay (its time is then set when it is stored)."""
    if AT in doc and DELAY in doc:
        raise InvalidArgument(f"{where}: give {AT} or {DELAY}, not both")
    if DELAY in doc:
        low, high = DELAY_RANGE
        delay = codec.integer(doc[DELAY])
        if delay is None or not low <= delay <= high:
            raise InvalidArgument(f"{where}.{DELAY} must be an integer between {low} and {high}")
        new.delays[index] = delay
        new.timestamps.append(0)
    elif AT in doc:
        new.timestamps.append(_integer(doc[AT], FIELDS[AT], f"{where}.{AT}"))
    else:
        raise InvalidArgument(f"{where}.{AT} is missing (or give {DELAY})")


def due_after_delays(new: NewMessages, now: int) -> None:
    """Set the time of each message given a delay: ``now`` plus its delay. One
    that would be due after the latest due time is refused, by name."""
    for index, delay in new.delays.items():
        at = now + delay
        if at > MAX_TIMESTAMP:
            raise InvalidArgument(
                f"body.messages[{index}].{DELAY}: {delay} ms from now is after 9999-12-31"
            )
        new.timestamps[index] = at


def _integer(value: Any, kind: int, where: str) -> int:
    low, high = codec.INT_RANGES[kind]
    number = codec.integer(value)
    if number is None or not low <= number <= high:
        raise InvalidArgument(f"{where} must be an integer between {low} and {high}")
    return number


def read_mode(doc: dict[str, Any], where: str) -> OnDuplicate:
    """The body's ``on_duplicate`` (absent: keep), or InvalidArgument naming it."""
    if ON_DUPLICATE not in doc:
        return OnDuplicate.KEEP
    value = doc[ON_DUPLICATE]
    if not isinstance(value, str):
        raise InvalidArgument(f"{where}.{ON_DUPLICATE} must be one of {', '.join(MODES)}")
    try:
        return OnDuplicate.named(value)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{where}.{ON_DUPLICATE}: {exc}") from None


async def _produce(
    surface: Surface,
    request: web.Request,
    caller: Caller,
    new: NewMessages,
    mode: OnDuplicate = OnDuplicate.KEEP,
) -> pb.ProduceResponse:
    """Store ``new`` as the produce frame it makes. A batch surely within the
    frame's byte cap goes to storage as it is; one that may be over it is
    encoded first, so the cap judges the very frame."""
    c = new.columns
    md, exp, pri = (c.get(name) for name in OPTIONS)
    req = pb.ProduceRequest(
        topic=request.match_info["topic"], on_duplicate=pb.OnDuplicate.Name(mode)
    )
    broker = surface.broker
    if new.delays:
        due_after_delays(new, broker.clock.now_ms())
    keys = new.keys or None
    heads = new.headers or None
    raw_keys = [k.encode() for k in keys] if keys else None
    extra = sum(map(len, raw_keys or ())) + sum(map(len, heads or ()))
    payload_bytes = sum(map(len, new.payloads))
    id_chars = sum(map(len, new.ids))
    size = messages_frame_at_most(len(new.ids), payload_bytes, id_chars, len(c), extra)
    if size <= broker.config.max_produce_bytes:
        batch = ProduceBatch(new.timestamps, new.ids, new.payloads, md, exp, pri, raw_keys, heads)

        async def store(b: BrokerContext, r: pb.ProduceRequest) -> pb.ProduceResponse:
            return await produce_decoded(b, r.topic, batch, mode)

        answer = await serve_unary(broker, surface.guard, "Produce", caller, store, req)
    else:
        req.batch = encode_messages(
            new.timestamps, new.payloads, new.ids, md, exp, pri, keys, heads
        )
        answer = await serve_unary(broker, surface.guard, "Produce", caller, produce, req)
    broker.metrics.http_request("Produce", grpc.StatusCode.OK)
    return answer


def _results(answer: pb.ProduceResponse) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """Each message's id and status, and the rejections."""
    status, ids = decode_results(answer.results)
    return ids, [STATUSES[s] for s in status], _rejections(answer)


def _rejections(answer: pb.ProduceResponse) -> list[dict[str, Any]]:
    return [
        {
            "index": r.index,
            "code": CODE_NAMES.get(r.code, "UNKNOWN"),
            "kind": r.kind,
            "reason": r.reason,
        }
        for r in answer.rejections
    ]


def produce_one(surface: Surface) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        caller = caller_of(surface.guard, request)  # before the body is read
        doc = await read_json(request)
        mode = OnDuplicate.KEEP
        if isinstance(doc, dict):
            if "messages" in doc:
                raise InvalidArgument("a batch goes to /v1/topics/{topic}/batches")
            mode = read_mode(doc, "body")
            doc = {k: v for k, v in doc.items() if k != ON_DUPLICATE}
        new = read_messages([doc], surface.broker.config.max_produce_messages)
        answer = await _produce(surface, request, caller, new, mode)
        (mid,), (stored,), rejections = _results(answer)
        if rejections:
            r = rejections[0]
            code = grpc.StatusCode[r["code"]] if r["code"] in grpc.StatusCode.__members__ else None
            status = status_for(code, r["kind"], default=400)
            return problem(status, r["code"], r["reason"], r["kind"])
        return json_response({"id": mid, "status": stored}, 201 if stored == "ACCEPTED" else 200)

    return handle


def produce_batch(surface: Surface) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def handle(request: web.Request) -> web.Response:
        caller = caller_of(surface.guard, request)  # before the body is read
        raw = await request.read()
        limit = surface.broker.config.max_produce_messages
        new = batch_json.read(raw, limit)  # a body with on_duplicate is not the common batch
        mode = OnDuplicate.KEEP
        if new is None:  # not the common batch: read, or refused, field by field
            doc = parse_json(raw)
            if not isinstance(doc, dict) or set(doc) - {ON_DUPLICATE} != {"messages"}:
                raise InvalidArgument(
                    "the body must be an object with one key, messages (a list), and optionally"
                    " on_duplicate"
                )
            mode = read_mode(doc, "body")
            new = read_messages(doc["messages"], limit)
        answer = await _produce(surface, request, caller, new, mode)
        ids, statuses, rejections = _results(answer)
        body = batch_json.answer(ids, statuses, rejections)
        return web.Response(body=body, content_type="application/json", charset="utf-8")

    return handle


# -- the OpenAPI side ---------------------------------------------------------

NEW_MESSAGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {
            "type": "string",
            "description": "unique in its topic; a second produce of it is a DUPLICATE."
            " Empty or absent: the broker makes one",
        },
        **{
            name: {**schemas.integer_schema(kind), "description": DESCRIPTIONS[name]}
            for name, kind in FIELDS.items()
        },
        DELAY: {
            "type": "integer",
            "minimum": DELAY_RANGE[0],
            "maximum": DELAY_RANGE[1],
            "description": DESCRIPTIONS[DELAY],
        },
        **schemas.text_and_base64("payload"),
        KEY: {
            "type": "string",
            "description": "whose message it is (a tenant, a user, a campaign): the"
            " consumers' share goes round the keys. At most 256 bytes of UTF-8, no"
            " control characters; empty or absent: none",
        },
        HEADERS: {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "maxProperties": header_codec.MAX_HEADERS,
            "description": "metadata the consumer receives as it was sent (a content type,"
            " a traceparent): names are HTTP tokens, unique ignoring case; at most 64"
            " headers and 8 KiB in all",
        },
    },
    "additionalProperties": False,
    "allOf": [
        schemas.one_spelling(["payload", "payload" + codec.BASE64_SUFFIX]),
        {"oneOf": [{"required": [AT]}, {"required": [DELAY]}]},  # when: one, not both
    ],
}
MODE_DESCRIPTION = (
    "when the id is already waiting on the topic: keep it (DUPLICATE),"
    " replace it with this message, its due time, payload, key, headers and options"
    " (REPLACED: a trailing debounce), or extend it to this due time only (EXTENDED)."
    " One being delivered is left alone (LEASED); a dead or tombstoned id answers"
    " DUPLICATE"
)
MODE: dict[str, Any] = {
    "type": "string",
    "enum": MODES,
    "default": "keep",
    "description": MODE_DESCRIPTION,
}
ONE_MESSAGE: dict[str, Any] = {
    **NEW_MESSAGE,
    "properties": {**NEW_MESSAGE["properties"], ON_DUPLICATE: MODE},
}
RESULT = {
    "type": "object",
    "properties": {"id": {"type": "string"}, "status": {"type": "string", "enum": STATUSES}},
    "required": ["id", "status"],
    "additionalProperties": False,
}
REJECTION = {
    "type": "object",
    "properties": {
        "index": {"type": "integer", "minimum": 0},
        "code": {"type": "string"},
        "kind": {"type": "string"},
        "reason": {"type": "string"},
    },
    "required": ["index", "code", "kind", "reason"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class ProduceRoute:
    """A produce route: its own body (new messages, not a protobuf message)."""

    path: str
    serve: Callable[[Surface], Callable[[web.Request], Awaitable[web.Response]]]
    operation_id: str
    body: dict[str, Any]
    answers: dict[str, Any]  # HTTP status: its answer's schema
    summary: str
    method: str = "POST"
    rpc: str = "Produce"

    def operation(self) -> dict[str, Any]:
        responses = {status: json_body(s, "stored") for status, s in self.answers.items()}
        if self.serve is produce_one:
            by_id = {"topic": "$request.path.topic", "id": "$response.body#/id"}
            found = links({op: (op, by_id) for op in ("GetMessage", "Move", "Cancel")})
            responses["201"]["links"] = found
        return {
            "operationId": self.operation_id,
            "summary": self.summary,
            "tags": ["messages"],
            "x-grpc-method": self.rpc,
            "parameters": [
                {"name": "topic", "in": "path", "required": True, "schema": schemas.TOPIC_NAME}
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": self.body}},
            },
            "responses": {**responses, **problem_responses()},
        }


BATCH = {
    "type": "object",
    "properties": {
        "messages": {"type": "array", "items": NEW_MESSAGE},
        ON_DUPLICATE: {**MODE, "description": "for every message: " + MODE_DESCRIPTION},
    },
    "required": ["messages"],
    "additionalProperties": False,
}
BATCH_RESULTS = {
    "type": "object",
    "properties": {
        "results": {"type": "array", "items": RESULT},
        "rejections": {"type": "array", "items": REJECTION},
    },
    "required": ["results", "rejections"],
    "additionalProperties": False,
}
ROUTES = [
    ProduceRoute(
        "/v1/topics/{topic}/messages", produce_one, "Produce", ONE_MESSAGE,
        {"201": RESULT, "200": RESULT},
        "Produce one message (201: stored; 200: its id was there: kept, replaced,"
        " extended or left leased)",
    ),
    ProduceRoute(
        "/v1/topics/{topic}/batches", produce_batch, "ProduceBatch", BATCH,
        {"200": BATCH_RESULTS},
        "Produce a batch: one produce frame, up to the broker's max_produce_messages"
        " and max_produce_bytes",
    ),
]  # fmt: skip
