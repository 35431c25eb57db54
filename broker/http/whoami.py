"""``GET /v1/whoami``: the caller and what they may do, so a client (the
console) shows only the controls the API would allow. The API still judges
every call; this answer only spares a person a button that would be refused."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
from aiohttp import web

from dejaq.broker.http.auth import caller_of
from dejaq.broker.http.route import Surface, json_body, json_response, problem_responses
from dejaq.broker.security.policy import Permission

PERMISSIONS = [p.value for p in Permission]
_NAMES = {"type": "array", "items": {"type": "string"}}
_ALLOWED = {"type": "array", "items": {"type": "string", "enum": PERMISSIONS}}
ANSWER = {
    "type": "object",
    "properties": {
        "principal": {"type": "string"},
        "anonymous": {"type": "boolean", "description": "a broker without --auth"},
        "grants": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"topics": _NAMES, "allow": _ALLOWED},
                "required": ["topics", "allow"],
            },
        },
        "topic": {"type": "string"},
        "permissions": {**_ALLOWED, "description": "on the topic asked about"},
    },
    "required": ["principal", "anonymous", "grants"],
}


@dataclass(frozen=True)
class WhoAmI:
    method: str = "GET"
    path: str = "/v1/whoami"
    rpc: str = "WhoAmI"

    def operation(self) -> dict[str, Any]:
        return {
            "operationId": self.rpc,
            "summary": "The caller, its grants, and its permissions on a topic",
            "tags": ["security"],
            "parameters": [
                {
                    "name": "topic",
                    "in": "query",
                    "schema": {"type": "string"},
                    "description": "answer `permissions` on this topic",
                }
            ],
            "responses": {"200": json_body(ANSWER, "the caller"), **problem_responses()},
        }

    def serve(self, surface: Surface) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            guard = surface.guard
            caller = caller_of(guard, request)
            policy = guard.policy
            principal = policy.principal(caller.principal) if policy is not None else None
            grants = [
                {"topics": list(g.patterns), "allow": sorted(p.value for p in g.permissions)}
                for g in (principal.grants if principal is not None else ())
            ]
            if policy is None:
                grants = [{"topics": ["*"], "allow": [Permission.ADMIN.value]}]
            doc: dict[str, Any] = {
                "principal": caller.principal,
                "anonymous": policy is None,
                "grants": grants,
            }
            topic = request.query.get("topic")
            if topic is not None:
                doc["topic"] = topic
                doc["permissions"] = [p.value for p in Permission if guard.allows(caller, p, topic)]
            surface.broker.metrics.http_request(self.rpc, grpc.StatusCode.OK)
            return json_response(doc)

        return handle


ROUTES = [WhoAmI()]
