"""Errors as ``application/problem+json`` (RFC 9457), carrying the gRPC code.

A problem names the gRPC status code the same error gets on the gRPC surface
(``code``: ``NOT_FOUND``, ``INVALID_ARGUMENT``, ...) and the error's kind
(``kind``: ``StaleVersion``, ``Leased``, ...; the class of the one exception
tree), so a client tells refusals apart as the driver does; ``status`` is the
HTTP status that fits the code.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any

import grpc
from aiohttp import web

from dejaq.core.errors import DejaqError, Unauthenticated
from dejaq.core.wire.status import code_for, kind_of

CONTENT_TYPE = "application/problem+json"
HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,  # a stale version: read again, then retry
    grpc.StatusCode.FAILED_PRECONDITION: 409,  # leased, not the lease holder, wrong kind
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.UNKNOWN: 500,
}
# Every code a problem may carry (the OpenAPI document lists them): the above,
# UNIMPLEMENTED for a method a path does not serve, and DEADLINE_EXCEEDED (408)
# for a body that did not arrive in time (limits.py).
CODES = sorted({c.name for c in HTTP_STATUS} | {"UNIMPLEMENTED", "DEADLINE_EXCEEDED"})


def problem(
    status: int, code: str, detail: str, kind: str = "", headers: dict[str, str] | None = None
) -> web.Response:
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if kind:
        body["kind"] = kind
    return web.Response(
        status=status, text=json.dumps(body), content_type=CONTENT_TYPE, headers=headers
    )


def from_error(exc: DejaqError) -> web.Response:
    code = code_for(exc)
    status = HTTP_STATUS.get(code, 500)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthenticated) else None
    return problem(status, code.name, str(exc), kind_of(exc), headers)
