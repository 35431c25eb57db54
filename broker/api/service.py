"""The gRPC servicer: routes each RPC to its handler and maps errors to status codes.

Every call passes the guard first (``dejaq.broker.security``): it is
authenticated, checked against the permission table, and served with the
caller set for the handlers that need it (lease owners).

Here an error that ends a call becomes its gRPC status (through the one table
in ``dejaq.core.wire.status``, which also codes the per-message refusals inside
stream frames); anything else is logged and answered INTERNAL, and the broker
keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from dejaq.broker.api import control, forecast, keys
from dejaq.broker.api.by_due import list_by_due
from dejaq.broker.api.calls import serve_unary
from dejaq.broker.api.consume import consume_stream
from dejaq.broker.api.produce import produce_stream
from dejaq.broker.api.scan import scan_bucket
from dejaq.broker.cluster.status import cluster_status
from dejaq.broker.context import BrokerContext
from dejaq.broker.cron import control as cron
from dejaq.broker.security.guard import Guard, Refusal
from dejaq.broker.security.identity import CALLER, Caller
from dejaq.broker.streams import after_opening_frame
from dejaq.core.errors import DejaqError, Unauthenticated
from dejaq.core.wire.status import code_for, details_for, trailing_metadata_for
from dejaq.proto import dejaq_pb2 as pb
from dejaq.proto import dejaq_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)
Req = TypeVar("Req")
Resp = TypeVar("Resp")


async def _abort(
    broker: BrokerContext,
    method: str,
    context: grpc.aio.ServicerContext[Any, Any],
    exc: BaseException,
) -> None:
    if isinstance(exc, DejaqError):
        broker.metrics.request(method, code_for(exc))
        await context.abort(code_for(exc), details_for(exc), trailing_metadata_for(exc))
    if isinstance(exc, asyncio.CancelledError):
        broker.metrics.request(method, grpc.StatusCode.CANCELLED)
        raise exc
    broker.metrics.request(method, grpc.StatusCode.INTERNAL)
    log.exception("unexpected error in %s", method, exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(exc).__name__}")


def _unary(
    method: str, handler: Callable[[BrokerContext, Req], Awaitable[Resp]]
) -> Callable[[TimelineService, Req, grpc.aio.ServicerContext[Any, Any]], Awaitable[Resp]]:
    async def rpc(self: TimelineService, request: Req, context: Any) -> Resp:
        try:
            caller = self.guard.authenticate(context)
            response = await serve_unary(self.broker, self.guard, method, caller, handler, request)
        except Exception as exc:
            await _abort(self.broker, method, context, exc)
            raise  # unreachable: abort raises
        self.broker.metrics.request(method, grpc.StatusCode.OK)
        return response

    return rpc


def _stream(
    method: str, handler: Callable[[BrokerContext, AsyncIterator[Req]], AsyncIterator[Resp]]
) -> Callable[[TimelineService, AsyncIterator[Req], Any], AsyncIterator[Resp]]:
    async def rpc(self: TimelineService, requests: AsyncIterator[Req], context: Any) -> Any:
        refusal = Refusal()
        try:
            caller = await _authenticate_stream(self.guard, context, requests)
            CALLER.set(caller)  # the stream's own task: the value ends with it
            frames = self.guard.admit_frames(method, caller, requests, refusal)
            async for response in handler(self.broker, frames):
                yield response
            if refusal.error is not None:
                raise refusal.error
        except (Exception, asyncio.CancelledError) as exc:
            # A refused frame ended the requests: that, not how the handler
            # took the early end, is why the stream stops.
            cancelled = isinstance(exc, asyncio.CancelledError)
            await _abort(self.broker, method, context, exc if cancelled else refusal.error or exc)
        else:
            self.broker.metrics.request(method, grpc.StatusCode.OK)

    return rpc


async def _authenticate_stream(guard: Guard, context: Any, requests: AsyncIterator[Any]) -> Caller:
    """The caller of a stream. A refused one is told after its opening frame has
    arrived (``streams.after_opening_frame``)."""
    try:
        return guard.authenticate(context)
    except Unauthenticated:
        await after_opening_frame(requests)
        raise


async def _consume(
    self: TimelineService, requests: AsyncIterator[pb.ConsumeRequest], context: Any
) -> AsyncIterator[pb.ConsumeResponse]:
    """Consume, able to end the call at once: a write to a consumer that does not
    read waits for it, so a status raised from the stream would wait too. The
    cut-off (from another task) and the stream's own error end the call once."""
    ended = False
    refusal = Refusal()

    async def cut_off(exc: DejaqError) -> None:
        nonlocal ended
        if not ended:
            ended = True
            with contextlib.suppress(Exception):  # abort raises once the status is sent
                await _abort(self.broker, "Consume", context, exc)

    try:
        caller = await _authenticate_stream(self.guard, context, requests)
        CALLER.set(caller)  # the stream's own task: the value ends with it
        frames = self.guard.admit_frames("Consume", caller, requests, refusal)
        async for response in consume_stream(self.broker, frames, cut_off):
            yield response
        if refusal.error is not None:
            raise refusal.error
    except asyncio.CancelledError as exc:
        await _abort(self.broker, "Consume", context, exc)
    except Exception as exc:
        if not ended:  # else the cut-off has ended the call with its status
            ended = True
            # A refused frame ended the requests: that is why the stream stops.
            await _abort(self.broker, "Consume", context, refusal.error or exc)
    else:
        self.broker.metrics.request("Consume", grpc.StatusCode.OK)


class TimelineService(pb_grpc.TimelineServicer):
    def __init__(self, broker: BrokerContext, guard: Guard | None = None) -> None:
        self.broker = broker
        self.guard = guard or Guard()

    CreateTopic = _unary("CreateTopic", control.create_topic)
    DeleteTopic = _unary("DeleteTopic", control.delete_topic)
    ListTopics = _unary("ListTopics", control.list_topics)
    DescribeTopic = _unary("DescribeTopic", control.describe_topic)
    UpdateTopic = _unary("UpdateTopic", control.update_topic)
    CronAdd = _unary("CronAdd", cron.add)
    CronUpdate = _unary("CronUpdate", cron.update)
    CronGet = _unary("CronGet", cron.get)
    CronList = _unary("CronList", cron.list_)
    CronDelete = _unary("CronDelete", cron.delete)
    GetMessage = _unary("GetMessage", control.get_message)
    Move = _unary("Move", control.move)
    Cancel = _unary("Cancel", control.cancel)
    Ack = _unary("Ack", control.ack)
    Extend = _unary("Extend", control.extend)
    Nack = _unary("Nack", control.nack)
    ListDead = _unary("ListDead", control.list_dead)
    Redrive = _unary("Redrive", control.redrive)
    ScanBucket = _unary("ScanBucket", scan_bucket)
    ListByDue = _unary("ListByDue", list_by_due)
    Forecast = _unary("Forecast", forecast.forecast)
    SetKeyLimit = _unary("SetKeyLimit", keys.set_limit)
    GetKeyLimit = _unary("GetKeyLimit", keys.get_limit)
    ListKeyLimits = _unary("ListKeyLimits", keys.list_limits)
    RemoveKeyLimit = _unary("RemoveKeyLimit", keys.remove_limit)
    TopicKeys = _unary("TopicKeys", keys.busiest)
    Produce = _stream("Produce", produce_stream)
    Consume = _consume
    ClusterStatus = _unary("ClusterStatus", cluster_status)


__all__ = ["TimelineService", "pb"]
