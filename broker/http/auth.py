"""The caller of an HTTP request, judged by the gRPC surface's guard: the same
principals file, tokens and client certificate names."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from dejaq.broker.security.guard import Guard, bearer_token
from dejaq.broker.security.identity import ANONYMOUS, Caller


def caller_of(guard: Guard, request: web.Request) -> Caller:
    """``Authorization: Bearer TOKEN``, else the client certificate's CN (mutual
    TLS); ``Unauthenticated`` when the broker has ``--auth`` and neither is known."""
    if guard.policy is None:
        return ANONYMOUS
    header = request.headers.get("Authorization")
    token = bearer_token(header) if header is not None else None
    return guard.identify(token, _certificate_cn(request))


def _certificate_cn(request: web.Request) -> str | None:
    transport = request.transport
    cert: Any = transport.get_extra_info("peercert") if transport is not None else None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
