"""The HTTP surface's server: aiohttp in the broker's own event loop, so a
request runs the broker's handlers directly, with no thread and no second loop.

Every request passes the error middleware: a refusal becomes a problem
(``problems.py``) and changes nothing; an error no handler expected is logged
and answered 500, and the broker keeps serving. Bodies are bounded (twice the
produce frame limit: base64 and JSON around a full batch), and so are the time
a request's head and body may take and the connections open (``limits.py``).
A client that leaves mid-request is said in one line at DEBUG.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import grpc
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from dejaq.broker.http import (
    bridges,
    cron,
    keys,
    messages,
    openapi,
    outboxes,
    produce,
    pull,
    stream,
    topics,
    whoami,
)
from dejaq.broker.http.console import add_console
from dejaq.broker.http.limits import BodyTimeout, BoundedSite, body_deadline
from dejaq.broker.http.problems import from_error, problem
from dejaq.broker.http.route import Endpoint, Surface
from dejaq.core.errors import DejaqError
from dejaq.core.wire.status import code_for

log = logging.getLogger(__name__)


class _MalformedRequests(logging.Filter):
    """aiohttp answers a request its parser refuses (a NUL in a header, a bad
    request line) with 400 and logs it as an error with a traceback: anyone
    who reaches the port could fill the log. Said in one line at DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not isinstance(exc, HttpProcessingError):
            return True
        if not log.isEnabledFor(logging.DEBUG):
            return False
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        record.msg, record.args = "malformed HTTP request refused: %s", (exc.message,)
        record.exc_info, record.exc_text = None, None
        return True


_QUIET = _MalformedRequests()
ROUTES: list[Endpoint] = [
    *topics.ROUTES,
    *produce.ROUTES,
    *messages.ROUTES,
    *cron.ROUTES,
    *keys.ROUTES,
    *whoami.ROUTES,
    *outboxes.ROUTES,
    *bridges.ROUTES,
    *pull.ROUTES,
    *stream.ROUTES,
]
BODY_SLACK = 1 << 20
# What an HTTP refusal that no handler raised says, as a gRPC code.
_HTTP_CODES = {404: "NOT_FOUND", 405: "UNIMPLEMENTED"}


def _package_version() -> str:
    try:
        return version("dejaq-timeline")
    except PackageNotFoundError:
        return "0"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _errors(broker_metrics: Any) -> Any:
    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except DejaqError as exc:
            broker_metrics.http_request(_rpc(request), code_for(exc))
            return from_error(exc)
        except BodyTimeout as exc:
            broker_metrics.http_request(_rpc(request), grpc.StatusCode.DEADLINE_EXCEEDED)
            return problem(408, "DEADLINE_EXCEEDED", str(exc), headers={"Connection": "close"})
        except web.HTTPException as exc:
            if exc.status < 400:
                raise
            code = _HTTP_CODES.get(exc.status, "INVALID_ARGUMENT")
            broker_metrics.http_request(_rpc(request), code)
            allow = {"Allow": exc.headers["Allow"]} if "Allow" in exc.headers else None
            return problem(exc.status, code, exc.reason, headers=allow)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if isinstance(exc, ConnectionError) and _left(request):  # nobody reads an answer
                log.debug("client left %s %s mid-request: %s", request.method, request.path, exc)
                broker_metrics.http_request(_rpc(request), grpc.StatusCode.CANCELLED)
                return web.Response(status=400)
            log.exception("unexpected error serving %s %s", request.method, request.path)
            broker_metrics.http_request(_rpc(request), grpc.StatusCode.INTERNAL)
            return problem(500, "INTERNAL", "internal error")

    return middleware


def _left(request: web.Request) -> bool:
    """Whether the client closed the connection (aiohttp fails its body read so)."""
    return request.transport is None or request.transport.is_closing()


def _rpc(request: web.Request) -> str:
    route = request.match_info.route
    return str(getattr(route.handler, "rpc", "http"))


def build_app(surface: Surface) -> web.Application:
    config = surface.broker.config
    limit = 2 * config.max_produce_bytes + BODY_SLACK
    body = body_deadline(config.http_body_timeout_ms / 1000)
    middlewares = [_errors(surface.broker.metrics), body]
    app = web.Application(client_max_size=limit, middlewares=middlewares)
    doc = json.dumps(openapi.document(ROUTES, _package_version()))

    async def openapi_json(request: web.Request) -> web.Response:
        return web.Response(text=doc, content_type="application/json")

    app.router.add_get("/openapi.json", openapi_json)
    for route in ROUTES:
        handler: Any = route.serve(surface)
        handler.rpc = route.rpc  # the metrics label of its refusals
        app.router.add_route(route.method, route.path, handler)
    add_console(app, surface)
    return app


@dataclass
class HttpEndpoint:
    """A running HTTP surface; ``stop`` closes it."""

    runner: web.AppRunner
    url: str

    async def stop(self) -> None:
        await self.runner.cleanup()


async def serve_http(surface: Surface, address: str, tls: ssl.SSLContext | None) -> HttpEndpoint:
    """Serve on ``address`` (HOST:PORT; port 0: any free one), HTTPS with ``tls``."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    logging.getLogger("aiohttp.server").addFilter(_QUIET)  # once: the same filter
    config = surface.broker.config
    header_s = config.http_header_timeout_ms / 1000
    # aiohttp closes a connection still waiting for a request's head when its
    # keep-alive timer ends: the header timeout (limits.py).
    runner = web.AppRunner(
        build_app(surface), access_log=None, handle_signals=False, keepalive_timeout=header_s
    )
    await runner.setup()
    site = BoundedSite(runner, host, int(port), config.http_max_connections, tls, header_s)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise OSError(f"cannot serve HTTP on {address}: {exc.strerror or exc}") from exc
    bound = runner.addresses[0][1] if runner.addresses else int(port)
    shown = f"[{host}]" if ":" in host else host
    return HttpEndpoint(runner, f"{'https' if tls else 'http'}://{shown}:{bound}")
