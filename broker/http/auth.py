"""The caller of an HTTP request, judged by the gRPC surface's guard: the same
principals file, tokens and client certificate names, and the console's
sessions (``session.py``) signed in with one of those tokens."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from dejaq.broker.http.session import COOKIE, check_csrf, session_of
from dejaq.broker.security.guard import Guard, bearer_token
from dejaq.broker.security.identity import ANONYMOUS, Caller
from dejaq.core.errors import Unauthenticated


def caller_of(guard: Guard, request: web.Request) -> Caller:
    """``Authorization: Bearer TOKEN``, else a console session cookie (with its
    CSRF header on a call that changes something), else the client
    certificate's CN (mutual TLS); ``Unauthenticated`` when the broker has
    ``--auth`` and none is known."""
    if guard.policy is None:
        return ANONYMOUS
    header = request.headers.get("Authorization")
    if header is not None:
        return guard.identify(bearer_token(header), _certificate_cn(request))
    session = session_of(request, guard.policy)
    if session is not None:
        check_csrf(request, session)
        return Caller(session.principal)
    cn = _certificate_cn(request)
    if cn is None and request.cookies.get(COOKIE):
        raise Unauthenticated("the console session has ended: sign in again")
    return guard.identify(None, cn)


def _certificate_cn(request: web.Request) -> str | None:
    transport = request.transport
    cert: Any = transport.get_extra_info("peercert") if transport is not None else None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
