"""Errors as ``application/problem+json`` (RFC 9457), carrying the gRPC code.

A problem names the gRPC status code the same error gets on the gRPC surface
(``code``: ``NOT_FOUND``, ``INVALID_ARGUMENT``, ...) and the error's kind
(``kind``: ``StaleVersion``, ``Leased``, ...; the class of the one exception
tree), so a client tells refusals apart as the driver does; ``status`` is the
HTTP status that fits the code.
"""

from __future__ import annotations

import dataclasses
import json
from http import HTTPStatus
from typing import Any

import grpc
from aiohttp import web

from dejaq.broker.api.existing_topic import SettingsDiffer
from dejaq.core.errors import DejaqError, PayloadTooLarge, Unauthenticated
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
# Kinds whose HTTP status says more than their code's: a payload over its
# topic's limit is INVALID_ARGUMENT on gRPC, and 413 Content Too Large here.
KIND_STATUS = {PayloadTooLarge.__name__: 413}
# Every code a problem may carry (the OpenAPI document lists them): the above,
# UNIMPLEMENTED for a method a path does not serve, and DEADLINE_EXCEEDED (408)
# for a body that did not arrive in time (limits.py).
CODES = sorted({c.name for c in HTTP_STATUS} | {"UNIMPLEMENTED", "DEADLINE_EXCEEDED"})


def problem(
    status: int,
    code: str,
    detail: str,
    kind: str = "",
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> web.Response:
    """``extra``: members the refusal adds (RFC 9457 extension members)."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "code": code,
    }
    if kind:
        body["kind"] = kind
    body.update(extra or {})
    return web.Response(
        status=status, text=json.dumps(body), content_type=CONTENT_TYPE, headers=headers
    )


def status_for(code: grpc.StatusCode | None, kind: str, default: int = 500) -> int:
    """The HTTP status of a refusal: by its kind where that says more, else by
    its code (one not mapped: ``default``)."""
    if kind in KIND_STATUS:
        return KIND_STATUS[kind]
    return default if code is None else HTTP_STATUS.get(code, default)


def from_error(exc: DejaqError) -> web.Response:
    code = code_for(exc)
    kind = kind_of(exc)
    status = status_for(code, kind)
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthenticated) else None
    return problem(status, code.name, str(exc), kind, headers, _extra(exc))


def _extra(exc: DejaqError) -> dict[str, Any] | None:
    """A topic that exists with other settings lists each difference."""
    if not isinstance(exc, SettingsDiffer):
        return None
    return {"differences": [dataclasses.asdict(d) for d in exc.differences]}
