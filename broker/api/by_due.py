"""ListByDue: a topic's live messages a page at a time by due time, for people
browsing it (the console): each page a bounded read of the time index."""

from __future__ import annotations

from dejaq.broker.api import validation
from dejaq.broker.context import BrokerContext
from dejaq.core.wire.convert import message_to_pb
from dejaq.proto import dejaq_pb2 as pb

DEFAULT_PAGE = 50
MAX_PAGE = 1000


async def list_by_due(broker: BrokerContext, req: pb.ListByDueRequest) -> pb.ListByDueResponse:
    topic = await broker.topics.get(req.topic)
    limit = min(req.limit or DEFAULT_PAGE, MAX_PAGE)
    after = None
    if req.HasField("after_timestamp_ms"):
        after = (
            req.after_timestamp_ms,
            validation.message_id(req.after_id) if req.after_id else "",
        )
    page = await broker.storage.by_due(topic.name, after, limit)
    now = broker.clock.now_ms()
    messages = [message_to_pb(topic, m, now) for m in page]
    if req.without_payloads:
        for m in messages:
            m.payload = b""
    last = page[-1] if len(page) == limit else None
    return pb.ListByDueResponse(
        messages=messages,
        next_after_timestamp_ms=last.timestamp if last else 0,
        next_after_id=last.id if last else "",
        done=last is None,
    )
