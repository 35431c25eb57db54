"""One unary call served: admitted by the guard, run with its caller set, its
answer trimmed to what the caller may see.

The gRPC servicer (``service.py``) and the HTTP surface (``broker/http/``) both
serve a call through ``serve_unary``, so a call means the same on either:
the same permission rule, the same handler, the same lease owner.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from dejaq.broker.context import BrokerContext
from dejaq.broker.security.guard import Guard
from dejaq.broker.security.identity import CALLER, Caller

Req = TypeVar("Req")
Resp = TypeVar("Resp")


async def serve_unary(
    broker: BrokerContext,
    guard: Guard,
    method: str,
    caller: Caller,
    handler: Callable[[BrokerContext, Req], Awaitable[Resp]],
    request: Req,
) -> Resp:
    """Run ``handler`` for ``caller`` if the rule of ``method`` admits ``request``."""
    guard.admit(method, caller, request)
    bound = CALLER.set(caller)
    try:
        response: Resp = guard.trim(method, caller, await handler(broker, request))
    finally:
        CALLER.reset(bound)
    return response
