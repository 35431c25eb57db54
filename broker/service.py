"""The gRPC servicer: routes each RPC to its handler and maps errors to status codes.

This is the only place a ``DejaqError`` becomes a gRPC status; anything else
is logged and answered INTERNAL, and the broker keeps serving.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from dejaq.broker import control
from dejaq.broker.consume import consume_stream
from dejaq.broker.context import Broker
from dejaq.broker.produce import produce_stream
from dejaq.core.errors import DejaqError
from dejaq.core.status import code_for
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)
Req = TypeVar("Req")
Resp = TypeVar("Resp")


async def _abort(context: grpc.aio.ServicerContext[Any, Any], exc: Exception) -> None:
    if isinstance(exc, DejaqError):
        await context.abort(code_for(exc), str(exc))
    log.exception("unexpected error", exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}")


def _unary(
    handler: Callable[[Broker, Req], Awaitable[Resp]],
) -> Callable[[TimelineService, Req, grpc.aio.ServicerContext[Any, Any]], Awaitable[Resp]]:
    async def rpc(self: TimelineService, request: Req, context: Any) -> Resp:
        try:
            return await handler(self.broker, request)
        except Exception as exc:
            await _abort(context, exc)
            raise  # unreachable: abort raises

    return rpc


def _stream(
    handler: Callable[[Broker, AsyncIterator[Req]], AsyncIterator[Resp]],
) -> Callable[[TimelineService, AsyncIterator[Req], Any], AsyncIterator[Resp]]:
    async def rpc(self: TimelineService, requests: AsyncIterator[Req], context: Any) -> Any:
        try:
            async for response in handler(self.broker, requests):
                yield response
        except Exception as exc:
            await _abort(context, exc)

    return rpc


class TimelineService(pb_grpc.TimelineServicer):
    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    CreateTopic = _unary(control.create_topic)
    DeleteTopic = _unary(control.delete_topic)
    ListTopics = _unary(control.list_topics)
    DescribeTopic = _unary(control.describe_topic)
    GetMessage = _unary(control.get_message)
    Move = _unary(control.move)
    Cancel = _unary(control.cancel)
    Ack = _unary(control.ack)
    Extend = _unary(control.extend)
    Nack = _unary(control.nack)
    ListDead = _unary(control.list_dead)
    Redrive = _unary(control.redrive)
    Produce = _stream(produce_stream)
    Consume = _stream(consume_stream)


__all__ = ["TimelineService", "pb"]
