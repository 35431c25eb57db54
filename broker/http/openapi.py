"""The OpenAPI 3.1 document of the HTTP surface, made from its route table
(``app.ROUTES``) and the protobuf descriptors: served at ``/openapi.json``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dejaq.broker.http.problems import CODES
from dejaq.broker.http.route import Endpoint

PROBLEM = {
    "type": "object",
    "description": "RFC 9457 problem details; code is the gRPC status code of the same refusal",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer", "minimum": 400, "maximum": 599},
        "detail": {"type": "string"},
        "code": {"type": "string", "enum": CODES},
        "kind": {"type": "string", "description": "the error's class: StaleVersion, Leased, ..."},
        "differences": {
            "type": "array",
            "description": "a topic that exists with other settings (PUT): each setting"
            " that differs, with the topic's value and the one asked",
            "items": {
                "type": "object",
                "properties": {
                    "setting": {"type": "string"},
                    "existing": {},
                    "requested": {},
                },
                "required": ["setting", "existing", "requested"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["type", "title", "status", "detail", "code"],
}


def document(routes: Sequence[Endpoint], version: str) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        paths.setdefault(route.path, {})[route.method.lower()] = route.operation()
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "dejaq",
            "version": version,
            "description": "The Timeline calls of a dejaq broker as JSON over HTTP. Payloads"
            " are text (payload) or base64 (payload_base64); times are epoch milliseconds"
            " (one that can only be seconds is refused). A field a body does not define is"
            " refused by name. Errors are RFC 9457 problems with the gRPC status code in"
            " code.",
        },
        "paths": paths,
        "components": {
            "schemas": {"Problem": PROBLEM},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        # Without --auth the broker serves anyone (loopback only); with it, a token
        # or a client certificate (mutual TLS) is required.
        "security": [{}, {"bearer": []}],
    }
