"""``GET /v1/outboxes``: the transactional outboxes this broker relays
(``--outbox``), for the console. Their rows span topics, so only a caller
granted ``describe`` on every topic (a grant on ``*``) may read them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web

from dejaq.broker.http.auth import caller_of
from dejaq.broker.http.route import Surface, json_body, json_response, problem_responses
from dejaq.broker.outbox.status import outboxes
from dejaq.broker.security.policy import Permission

_PARKED = {
    "type": "object",
    "properties": {
        "seq": {"type": "integer"},
        "op": {"type": "string", "enum": ["schedule", "move", "cancel"]},
        "topic": {"type": "string"},
        "id": {"type": "string"},
        "reason": {"type": "string"},
        "parked_at_ms": {"type": "integer"},
    },
    "required": ["seq", "op", "topic", "id", "reason", "parked_at_ms"],
}
_OUTBOX = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "its URL, the password left out"},
        "waiting": {"type": "integer"},
        "oldest_age_s": {"type": ["number", "null"]},
        "parked": {"type": "integer"},
        "parked_rows": {"type": "array", "items": _PARKED},
        "error": {"type": "string", "description": "why it cannot be read now"},
    },
    "required": ["name"],
}
ANSWER = {
    "type": "object",
    "properties": {"outboxes": {"type": "array", "items": _OUTBOX}},
    "required": ["outboxes"],
}


@dataclass(frozen=True)
class Outboxes:
    method: str = "GET"
    path: str = "/v1/outboxes"
    rpc: str = "ListOutboxes"

    def operation(self) -> dict[str, Any]:
        return {
            "operationId": self.rpc,
            "summary": "The transactional outboxes this broker relays: rows waiting, parked rows",
            "tags": ["outbox"],
            "responses": {"200": json_body(ANSWER, "each outbox"), **problem_responses()},
        }

    def serve(self, surface: Surface) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            caller = caller_of(surface.guard, request)
            surface.guard.authorize(caller, Permission.DESCRIBE, "*")
            doc = {"outboxes": await outboxes(surface.broker)}
            surface.broker.metrics.http_request(self.rpc, grpc.StatusCode.OK)
            return json_response(doc)

        return handle


ROUTES = [Outboxes()]
