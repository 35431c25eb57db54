"""``GET /v1/bridges``: the bridges this broker runs (``--bridges``), for the
console. A bridge's source and sink span topics, so only a caller granted
``describe`` on every topic (a grant on ``*``) may read them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web

from dejaq.broker.bridges.status import bridges
from dejaq.broker.http.auth import caller_of
from dejaq.broker.http.route import Surface, json_body, json_response, problem_responses
from dejaq.broker.security.policy import Permission

_COUNT = {"type": "integer"}
_BRIDGE = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "source": {"type": "string", "description": "its URL, the password left out"},
        "topic": {"type": "string"},
        "sink": {"type": ["string", "null"], "description": "its URL, the password left out"},
        "lag": {**_COUNT, "description": "messages at the source not read yet"},
        "held": {**_COUNT, "description": "messages on the topic not published yet"},
        "accepted": _COUNT,
        "published": _COUNT,
        "unreadable": _COUNT,
        "errors": _COUNT,
        "error": {"type": "string", "description": "why the bridges file cannot be read now"},
    },
    "required": ["name"],
}
ANSWER = {
    "type": "object",
    "properties": {"bridges": {"type": "array", "items": _BRIDGE}},
    "required": ["bridges"],
}


@dataclass(frozen=True)
class Bridges:
    method: str = "GET"
    path: str = "/v1/bridges"
    rpc: str = "ListBridges"

    def operation(self) -> dict[str, Any]:
        return {
            "operationId": self.rpc,
            "summary": "The bridges this broker runs: their ends, lag, held, published, errors",
            "tags": ["bridges"],
            "responses": {"200": json_body(ANSWER, "each bridge"), **problem_responses()},
        }

    def serve(self, surface: Surface) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            caller = caller_of(surface.guard, request)
            surface.guard.authorize(caller, Permission.DESCRIBE, "*")
            doc = {"bridges": bridges(surface.broker)}
            surface.broker.metrics.http_request(self.rpc, grpc.StatusCode.OK)
            return json_response(doc)

        return handle


ROUTES = [Bridges()]
