"""A route of the HTTP surface: one Timeline call, its request read from the
path, the query (GET, DELETE) or the JSON body (POST, PUT, PATCH), served through
the gRPC surface's own call path (``broker/api/calls.py``).

The route table is also the source of the OpenAPI document (``openapi.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc
from aiohttp import web
from google.protobuf.message import Message

from dejaq.broker.api.calls import serve_unary
from dejaq.broker.context import BrokerContext
from dejaq.broker.http import codec, schemas
from dejaq.broker.http.auth import caller_of
from dejaq.broker.http.lease_tokens import Signer
from dejaq.broker.security.guard import Guard
from dejaq.core.errors import InvalidArgument

Handler = Callable[[BrokerContext, Any], Awaitable[Message]]
PATH_FIELD = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Surface:
    """What every route serves with: the broker and its guard."""

    broker: BrokerContext
    guard: Guard
    # Signs HTTP consumers' lease tokens: with the cluster's shared key, so a
    # token settles through any broker of it (lease_tokens.py).
    tokens: Signer = field(default_factory=Signer)


class Endpoint(Protocol):
    """What the app serves and the OpenAPI document describes."""

    @property
    def method(self) -> str: ...

    @property
    def path(self) -> str: ...

    @property
    def rpc(self) -> str: ...

    def operation(self) -> dict[str, Any]: ...

    def serve(self, surface: Surface) -> Callable[[web.Request], Awaitable[web.StreamResponse]]: ...


@dataclass(frozen=True)
class Route:
    method: str
    path: str
    rpc: str  # the Timeline call: its permission rule, its metrics label
    handler: Handler
    request: type[Message]
    response: type[Message]
    summary: str
    tag: str
    status: int = 200
    fixed: Mapping[str, Any] = field(default_factory=dict)  # request fields the route sets
    accepts: tuple[str, ...] | None = None  # the only fields a client may give (None: all)
    # OpenAPI links from the answer to the calls it leads to (a generated client, and
    # schemathesis's stateful phase, follow them): link name -> (operationId, parameters)
    links: Mapping[str, tuple[str, Mapping[str, str]]] = field(default_factory=dict)
    operation_id: str = ""  # where the call and path alone would name two operations alike

    @property
    def path_fields(self) -> list[str]:
        return PATH_FIELD.findall(self.path)

    @property
    def has_body(self) -> bool:
        return self.method in ("POST", "PUT", "PATCH")

    @property
    def set_by_route(self) -> set[str]:
        """Request fields a client may not give in the body or query."""
        if self.accepts is not None:
            return {f.name for f in self.request.DESCRIPTOR.fields} - set(self.accepts)
        return {*self.path_fields, *self.fixed}

    def operation(self) -> dict[str, Any]:
        return operation_of(self)

    def serve(self, surface: Surface) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            caller = caller_of(surface.guard, request)
            message = await self.read(request)
            answer = await serve_unary(
                surface.broker, surface.guard, self.rpc, caller, self.handler, message
            )
            surface.broker.metrics.http_request(self.rpc, grpc.StatusCode.OK)
            return json_response(codec.to_json(answer), self.status)

        return handle

    async def read(self, request: web.Request) -> Message:
        """The call's request message from the HTTP request."""
        descriptor = self.request.DESCRIPTOR
        if self.has_body:
            doc = await read_json(request)
        else:
            doc = codec.query_to_json(descriptor, _multi(request.query))
        message = codec.from_json(self.request, doc, skip=self.set_by_route)
        path = {k: [request.match_info[k]] for k in self.path_fields}
        codec.fill(message, codec.query_to_json(descriptor, path), "path")
        codec.fill(message, dict(self.fixed), "route")
        return message


def _multi(query: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in query.items():
        out.setdefault(key, []).append(value)
    return out


async def read_json(request: web.Request) -> Any:
    """The JSON body (none: an empty object). Bounded by the app's body limit."""
    return parse_json(await request.read())


def parse_json(raw: bytes) -> Any:
    """A request body's JSON (none: an empty object); not JSON: ``InvalidArgument``."""
    if not raw.strip():
        return {}
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, huge numbers
        raise InvalidArgument(f"the body is not JSON: {exc}") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def json_response(doc: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, text=json.dumps(doc), content_type="application/json")


PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


def problem_responses() -> dict[str, Any]:
    """Every refusal: a problem (``problems.py``)."""
    return {
        "default": {
            "description": "a refusal or an error, as RFC 9457 problem details",
            "content": {"application/problem+json": {"schema": PROBLEM_REF}},
        }
    }


def json_body(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def operation_of(route: Route) -> dict[str, Any]:
    """The route's OpenAPI operation, from its request and response messages."""
    descriptor = route.request.DESCRIPTOR
    skip = route.set_by_route
    params: list[dict[str, Any]] = []
    for name in route.path_fields:
        schema = schemas.field_schema(descriptor.fields_by_name[name], output=False)
        if schema["type"] == "string" and "pattern" not in schema:
            schema = {**schema, "minLength": 1}
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    op: dict[str, Any] = {
        "operationId": _operation_id(route),
        "summary": route.summary,
        "tags": [route.tag],
        "x-grpc-method": route.rpc,
    }
    if route.has_body:
        body = schemas.message_schema(descriptor, output=False, skip=skip)
        op["requestBody"] = {
            "required": False,
            "content": {"application/json": {"schema": body}},
        }
    else:
        for f in descriptor.fields:
            if f.name not in skip and f.type != codec.F.TYPE_MESSAGE:
                params.append(
                    {"name": f.name, "in": "query", "schema": schemas.field_schema(f, False)}
                )
    if params:
        op["parameters"] = params
    answer = schemas.message_schema(route.response.DESCRIPTOR, output=True)
    done = json_body(answer, "done")
    if route.links:
        done["links"] = links(route.links)
    op["responses"] = {str(route.status): done, **problem_responses()}
    return op


def links(table: Mapping[str, tuple[str, Mapping[str, str]]]) -> dict[str, Any]:
    return {
        name: {"operationId": op, "parameters": dict(params)}
        for name, (op, params) in table.items()
    }


def _operation_id(route: Route) -> str:
    if route.operation_id:
        return route.operation_id
    last = route.path.rstrip("/").rsplit("/", 1)[-1]
    return route.rpc if last.startswith("{") or not route.fixed else f"{route.rpc}_{last}"
