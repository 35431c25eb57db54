"""Console sessions: a token signed in once, then a cookie instead of it.

The table lives in the broker's memory: the cookie holds only a random id,
never the token, and a broker restart signs everyone out. Each session has
its own CSRF token, which the console's script sends in ``X-CSRF-Token`` on
every call that changes something; a cookie alone (what a forged cross-site
request carries) changes nothing. The cookie is ``HttpOnly`` (no script
reads it), ``SameSite=Strict`` and, under TLS, ``Secure``.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass

from aiohttp import web

from dejaq.core.errors import PermissionDenied

COOKIE = "dejaq_session"
CSRF_HEADER = "X-CSRF-Token"
LIFETIME_S = 8 * 3600
MAX_SESSIONS = 10_000  # the oldest goes first: sign-ins cannot grow the table without end
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Session:
    principal: str
    csrf_token: str
    expires_at: float


class Sessions:
    """Signed-in console sessions by id (the cookie's value)."""

    def __init__(self, lifetime_s: float = LIFETIME_S) -> None:
        self.lifetime_s = lifetime_s
        self._table: OrderedDict[str, Session] = OrderedDict()

    def open(self, principal: str) -> tuple[str, Session]:
        while len(self._table) >= MAX_SESSIONS:
            self._table.popitem(last=False)
        sid = secrets.token_urlsafe(32)
        session = Session(principal, secrets.token_urlsafe(32), time.monotonic() + self.lifetime_s)
        self._table[sid] = session
        return sid, session

    def get(self, sid: str) -> Session | None:
        session = self._table.get(sid)
        if session is not None and session.expires_at <= time.monotonic():
            del self._table[sid]
            return None
        return session

    def close(self, sid: str) -> None:
        self._table.pop(sid, None)


SESSIONS = web.AppKey("sessions", Sessions)


def session_of(request: web.Request) -> Session | None:
    """The request's console session (None: no cookie, or one not signed in)."""
    sid = request.cookies.get(COOKIE)
    sessions = request.app.get(SESSIONS)
    if not sid or sessions is None:
        return None
    return sessions.get(sid)


def check_csrf(request: web.Request, session: Session) -> None:
    """A call that changes something must carry the session's CSRF token."""
    if request.method in SAFE_METHODS:
        return
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), session.csrf_token.encode()):
        raise PermissionDenied(
            f"a console request that changes something needs the session's {CSRF_HEADER} header"
        )
