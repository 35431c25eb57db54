"""The web console at ``/console/``: static files shipped in the package
(``console_files/``), served from memory (gzipped once at start), and the sign-in
calls that open and close a session (``session.py``). Failed sign-ins are
limited per client address (``sign_in_limit.py``) and logged, never with the
token.

The pages call only the HTTP API, so what the console does a script can do.
Only files in the package folder are served, by exact name: no path from a
request reaches the file system.
"""

from __future__ import annotations

import gzip
import logging
from dataclasses import dataclass
from importlib.resources import files

import grpc
from aiohttp import web

from dejaq.broker.http.problems import problem
from dejaq.broker.http.route import Surface, json_response, read_json
from dejaq.broker.http.session import COOKIE, SESSIONS, Sessions, check_csrf, session_of
from dejaq.broker.http.sign_in_limit import SignInLimit, retry_after_header
from dejaq.core.errors import InvalidArgument, Unauthenticated

log = logging.getLogger(__name__)

PREFIX = "/console/"
TYPES = {
    ".html": "text/html",
    ".js": "text/javascript",
    ".css": "text/css",
    ".svg": "image/svg+xml",
    ".txt": "text/plain",
}
# The pages load only their own files and call only this origin; no frame may hold them.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; object-src 'none';"
        " base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


@dataclass(frozen=True)
class Asset:
    content_type: str
    body: bytes
    gzipped: bytes


def assets() -> dict[str, Asset]:
    """The console's files by name under ``/console/`` (``""``: the page)."""
    found: dict[str, Asset] = {}
    folder = files("dejaq.broker.http") / "console_files"
    for entry in folder.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_file() and suffix in TYPES:
            body = entry.read_bytes()
            charset = "; charset=utf-8" if suffix != ".svg" else ""
            found[entry.name] = Asset(TYPES[suffix] + charset, body, gzip.compress(body, 9))
    found[""] = found["index.html"]
    return found


def add_console(app: web.Application, surface: Surface) -> None:
    table = assets()
    sessions = Sessions()
    app[SESSIONS] = sessions
    limit = SignInLimit()

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(PREFIX)

    async def asset(request: web.Request) -> web.Response:
        found = table.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound(reason="no such console file")
        headers = dict(HEADERS)
        headers["Vary"] = "Accept-Encoding"
        body = found.body
        if "gzip" in request.headers.get("Accept-Encoding", ""):
            headers["Content-Encoding"] = "gzip"
            body = found.gzipped
        headers["Content-Type"] = found.content_type
        return web.Response(body=body, headers=headers)

    async def whoami_session(request: web.Request) -> web.Response:
        """The session of this browser: its principal and CSRF token."""
        if surface.guard.policy is None:
            return json_response({"principal": "", "anonymous": True, "csrf_token": ""})
        session = session_of(request, surface.guard.policy)
        if session is None:
            raise Unauthenticated("not signed in")
        return json_response(
            {"principal": session.principal, "anonymous": False, "csrf_token": session.csrf_token}
        )

    async def sign_in(request: web.Request) -> web.Response:
        # JSON only: a cross-site HTML form cannot send it without a CORS preflight.
        if request.content_type != "application/json":
            raise InvalidArgument('sign in with a JSON body {"token": ...}')
        doc = await read_json(request)
        token = doc.get("token") if isinstance(doc, dict) else None
        if not isinstance(token, str) or not token:
            raise InvalidArgument("body.token must be a non-empty string")
        policy = surface.guard.policy
        if policy is None:
            return json_response({"principal": "", "anonymous": True, "csrf_token": ""})
        address = request.remote or ""
        wait_s = limit.retry_after(address)
        if wait_s > 0:
            return _too_many(surface, wait_s)
        principal = policy.by_token(token)
        if principal is None:
            paused = limit.failed(address)
            log.warning("console sign-in from %s refused: unknown token", address)
            if paused:
                wait_s = limit.retry_after(address)
                log.warning(
                    "console sign-ins from %s paused for %s s: too many unknown tokens",
                    address,
                    retry_after_header(wait_s),
                )
            raise Unauthenticated("unknown token")
        sid, session = sessions.open(principal, token, policy)
        answer = json_response(
            {"principal": session.principal, "anonymous": False, "csrf_token": session.csrf_token}
        )
        answer.set_cookie(
            COOKIE,
            sid,
            path="/",
            max_age=int(sessions.lifetime_s),
            httponly=True,
            samesite="Strict",
            secure=request.secure,
        )
        return answer

    async def sign_out(request: web.Request) -> web.Response:
        session = session_of(request, surface.guard.policy)
        if session is not None:
            check_csrf(request, session)
            sessions.close(request.cookies[COOKIE])
        answer = web.Response(status=204)
        answer.del_cookie(COOKIE, path="/")
        return answer

    app.router.add_get("/console", redirect)
    app.router.add_get(PREFIX + "session", whoami_session)
    app.router.add_post(PREFIX + "session", sign_in)
    app.router.add_delete(PREFIX + "session", sign_out)
    app.router.add_get(PREFIX + "{name:[A-Za-z0-9._-]*}", asset)


def _too_many(surface: Surface, wait_s: float) -> web.Response:
    surface.broker.metrics.http_request("http", grpc.StatusCode.RESOURCE_EXHAUSTED)
    after = retry_after_header(wait_s)
    return problem(
        429,
        grpc.StatusCode.RESOURCE_EXHAUSTED.name,
        f"too many failed sign-ins from this address: try again in {after} s",
        "ResourceExhausted",
        {"Retry-After": after},
    )
