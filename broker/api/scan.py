"""ScanBucket: a topic read a bucket at a time, one page of messages by id a call."""

from __future__ import annotations

from dejaq.broker.context import BrokerContext
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import State
from dejaq.core.wire.convert import message_to_pb
from dejaq.proto import dejaq_pb2 as pb

DEFAULT_PAGE = 1000
MAX_PAGE = 10_000
PAGE_BYTES = 16 << 20  # a page stops early past this much payload (frames are 64 MiB at most)
STATES = frozenset(s.value for s in State)


async def scan_bucket(broker: BrokerContext, req: pb.ScanBucketRequest) -> pb.ScanBucketResponse:
    topic = await broker.topics.get(req.topic)
    if req.bucket >= topic.settings.buckets:
        raise InvalidArgument(
            f"bucket {req.bucket} is not one of topic {topic.name!r}'s {topic.settings.buckets}"
        )
    unknown = set(req.states) - STATES
    if unknown:
        raise InvalidArgument(f"unknown states {sorted(unknown)}: expected {sorted(STATES)}")
    limit = min(req.limit or DEFAULT_PAGE, MAX_PAGE)
    page = await broker.storage.scan(topic.name, req.bucket, req.after_id, limit)
    now = broker.clock.now_ms()
    wanted = set(req.states)
    messages = []
    after, size = page.after_id, 0
    for n, m in enumerate(page.messages):
        if size > PAGE_BYTES:  # the rest comes with the next page
            after = page.messages[n - 1].id
            break
        p = message_to_pb(topic, m, now)
        if wanted and p.state not in wanted:
            continue
        if req.without_payloads:
            p.payload = b""
        size += len(p.payload) + len(p.id)
        messages.append(p)
    return pb.ScanBucketResponse(messages=messages, next_after_id=after or "", done=after is None)
