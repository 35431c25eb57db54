"""Console sessions: a token signed in once, then a cookie instead of it.

The table lives in the broker's memory: the cookie holds only a random id,
never the token, and a broker restart signs everyone out. Each session has
its own CSRF token, which the console's script sends in ``X-CSRF-Token`` on
every call that changes something; a cookie alone (what a forged cross-site
request carries) changes nothing. The cookie is ``HttpOnly`` (no script
reads it), ``SameSite=Strict`` and, under TLS, ``Secure``.

A session stands for the token that opened it, never longer: every use checks
it against the auth file in force (reloaded on SIGHUP), and it ends once its
principal is gone, its token no longer belongs to that principal, or the
principal's grants differ from those it signed in with. Each principal keeps
at most ``PER_PRINCIPAL`` sessions, and its new one ends only its own oldest:
no principal's sign-ins can end another's sessions.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from dejaq.broker.security.policy import Grant, Policy, Principal, token_digest
from dejaq.core.errors import PermissionDenied

COOKIE = "dejaq_session"
CSRF_HEADER = "X-CSRF-Token"
LIFETIME_S = 8 * 3600
# Browsers (and scripts) one principal may keep signed in at once; with the
# principals of the auth file, this bounds the whole table.
PER_PRINCIPAL = 64
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True)
class Session:
    principal: str
    token_sha256: bytes  # of the token that signed in (the token itself is not kept)
    grants: tuple[Grant, ...]  # the principal's, at sign-in
    csrf_token: str
    expires_at: float

    def holds_under(self, policy: Policy) -> bool:
        """Whether ``policy`` still stands behind this session: its principal is
        there, with the token it signed in with and the same grants."""
        principal = policy.principal(self.principal)
        if principal is None or principal.grants != self.grants:
            return False
        # Every hash compared in constant time, as Policy.by_token does.
        known = [hmac.compare_digest(self.token_sha256, h) for h in principal.token_hashes]
        return any(known)


class Sessions:
    """Signed-in console sessions by id (the cookie's value)."""

    def __init__(
        self,
        lifetime_s: float = LIFETIME_S,
        per_principal: int = PER_PRINCIPAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.lifetime_s = lifetime_s
        self.per_principal = per_principal
        self._clock = clock
        self._table: dict[str, Session] = {}
        self._of: dict[str, OrderedDict[str, None]] = {}  # principal -> its ids, oldest first
        self._checked_under: Policy | None = None  # the policy every session was last held to

    def __len__(self) -> int:
        return len(self._table)

    def open(self, principal: Principal, token: str, policy: Policy) -> tuple[str, Session]:
        """A new session of ``principal``, signed in with ``token`` under
        ``policy``; past the bound, the principal's own oldest ends."""
        if policy is not self._checked_under:
            self.sweep(policy)
        ids = self._of.get(principal.name, OrderedDict())
        now = self._clock()
        for sid in [s for s in ids if self._table[s].expires_at <= now]:
            self.close(sid)
        while len(ids) >= self.per_principal:
            self.close(next(iter(ids)))
        sid = secrets.token_urlsafe(32)
        session = Session(
            principal.name,
            token_digest(token),
            principal.grants,
            secrets.token_urlsafe(32),
            now + self.lifetime_s,
        )
        self._table[sid] = session
        self._of.setdefault(principal.name, OrderedDict())[sid] = None
        return sid, session

    def get(self, sid: str, policy: Policy) -> Session | None:
        """The live session ``sid`` under ``policy`` (None: there is none; one
        that expired or that the policy no longer stands behind ends here)."""
        session = self._table.get(sid)
        if session is None:
            return None
        if session.expires_at <= self._clock() or not session.holds_under(policy):
            self.close(sid)
            return None
        return session

    def sweep(self, policy: Policy) -> None:
        """End every session that expired or that ``policy`` no longer stands behind."""
        now = self._clock()
        for sid, session in list(self._table.items()):
            if session.expires_at <= now or not session.holds_under(policy):
                self.close(sid)
        self._checked_under = policy

    def close(self, sid: str) -> None:
        session = self._table.pop(sid, None)
        if session is None:
            return
        ids = self._of[session.principal]
        del ids[sid]
        if not ids:
            del self._of[session.principal]


SESSIONS = web.AppKey("sessions", Sessions)


def session_of(request: web.Request, policy: Policy | None) -> Session | None:
    """The request's console session under ``policy`` (None: no cookie, or one
    not signed in, or whose sign-in the policy no longer stands behind)."""
    sid = request.cookies.get(COOKIE)
    sessions = request.app.get(SESSIONS)
    if not sid or sessions is None or policy is None:
        return None
    return sessions.get(sid, policy)


def check_csrf(request: web.Request, session: Session) -> None:
    """A call that changes something must carry the session's CSRF token."""
    if request.method in SAFE_METHODS:
        return
    sent = request.headers.get(CSRF_HEADER, "")
    if not hmac.compare_digest(sent.encode(), session.csrf_token.encode()):
        raise PermissionDenied(
            f"a console request that changes something needs the session's {CSRF_HEADER} header"
        )
