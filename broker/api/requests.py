"""Registering the Timeline service so that dejaq, not gRPC, parses requests.

gRPC's generated registration parses each request before any handler runs,
and answers bytes that are not the method's request type with UNKNOWN
("Unexpected DecodeError"). Registered through ``add_to_server``, the service
gets the raw bytes, parses them here and answers INVALID_ARGUMENT instead; in a
stream, a frame that does not parse raises ``InvalidArgument`` where the
handler reads it, so it ends the stream as any other refused frame does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
from google.protobuf import message_factory
from google.protobuf.message import DecodeError, Message

from dejaq.broker.api.service import TimelineService
from dejaq.core.errors import InvalidArgument
from dejaq.proto import dejaq_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["Timeline"]


def parse(cls: type[Message], raw: bytes) -> Message:
    try:
        return cls.FromString(raw)
    except DecodeError as exc:
        raise InvalidArgument(f"not a {cls.DESCRIPTOR.name}: {exc}") from exc


async def _parsed(cls: type[Message], frames: AsyncIterator[bytes]) -> AsyncIterator[Message]:
    async for raw in frames:
        yield parse(cls, raw)


def _unary(service: TimelineService, name: str, cls: type[Message]) -> Callable[..., Any]:
    handler = getattr(service, name)

    async def rpc(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            request = parse(cls, raw)
        except InvalidArgument as exc:
            service.broker.metrics.request(name, grpc.StatusCode.INVALID_ARGUMENT)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return await handler(request, context)

    return rpc


def _stream(service: TimelineService, name: str, cls: type[Message]) -> Callable[..., Any]:
    handler = getattr(service, name)

    async def rpc(
        frames: AsyncIterator[bytes], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[Any]:
        async for response in handler(_parsed(cls, frames), context):
            yield response

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
