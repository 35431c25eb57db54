"""Registering the Timeline service so that dejaq, not gRPC, parses requests.

gRPC's generated registration parses each request before any handler runs,
and answers bytes that are not the method's request type with UNKNOWN
("Unexpected DecodeError"). Registered through ``add_to_server``, the service
gets the raw bytes, parses them here and answers INVALID_ARGUMENT instead; in a
stream, a frame that does not parse raises ``InvalidArgument`` where the
handler reads it, so it ends the stream as any other refused frame does.

No request outlives its call. gRPC keeps the exception that ended a call (the
abort) with the call's state, and that exception's traceback keeps every frame
it passed through with their locals, the request among them, until a cyclic
collection, which ``gc.freeze()`` at start-up makes rare: a client sending
refused frames would grow the broker frame by frame. So the frames an ending
call's exceptions passed through are cleared here, the one place every call
leaves by, and frames are read with ``context.read()``, not through gRPC's
request iterator, whose generator holds on to the last message it gave.
"""

from __future__ import annotations

import traceback
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError, Message

from dejaq.broker.api.service import TimelineService
from dejaq.core.errors import InvalidArgument
from dejaq.core.wire.status import details_for
from dejaq.proto import dejaq_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["Timeline"]


def parse(cls: type[Message], raw: bytes) -> Message:
    try:
        return cls.FromString(raw)
    except DecodeError as exc:
        raise InvalidArgument(f"not a {cls.DESCRIPTOR.name}: {exc}") from exc


class _Frames:
    """A stream's requests, parsed, read one by one from the call: nothing here
    holds a frame once it is handed on."""

    def __init__(self, cls: type[Message], context: grpc.aio.ServicerContext[Any, Any]) -> None:
        self._cls = cls
        self._context = context

    def __aiter__(self) -> _Frames:
        return self

    async def __anext__(self) -> Message:
        raw = await self._context.read()
        if raw is grpc.aio.EOF:
            raise StopAsyncIteration
        return parse(self._cls, raw)


def release_frames(exc: BaseException) -> None:
    """Clear the locals of the finished frames ``exc`` and the exceptions
    chained to it passed through (a frame still running is left as it is)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        e = pending.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        traceback.clear_frames(e.__traceback__)
        pending += (e.__context__, e.__cause__)


def _unary(service: TimelineService, name: str, cls: type[Message]) -> Callable[..., Any]:
    handler = getattr(service, name)

    async def call(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            request = parse(cls, raw)
        except InvalidArgument as exc:
            service.broker.metrics.request(name, grpc.StatusCode.INVALID_ARGUMENT)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, details_for(exc))
        del raw
        return await handler(request, context)

    async def rpc(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        # This frame stays with an abort's traceback, and runs while the others
        # are cleared: it keeps no request.
        answer = call(raw, context)
        del raw
        try:
            return await answer
        except BaseException as exc:
            release_frames(exc)
            raise

    return rpc


def _stream(service: TimelineService, name: str, cls: type[Message]) -> Callable[..., Any]:
    handler = getattr(service, name)

    async def rpc(
        unread: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        try:
            async for response in handler(_Frames(cls, context), context):
                yield response
        except BaseException as exc:
            release_frames(exc)
            raise

    return rpc


def add_to_server(service: TimelineService, server: grpc.aio.Server) -> None:
    """Serve every method of ``service``, requests parsed by dejaq."""
    handlers = {}
    for method in SERVICE.methods:
        cls = message_factory.GetMessageClass(method.input_type)
        serialize = message_factory.GetMessageClass(method.output_type).SerializeToString
        if method.client_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _stream(service, method.name, cls), response_serializer=serialize
            )
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(service, method.name, cls), response_serializer=serialize
            )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),)
    )
