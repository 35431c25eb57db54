"""The ClusterStatus RPC: brokers, topics, consumers and their bucket ranges."""

from __future__ import annotations

from dejaq.broker.cluster.assignment import as_ranges
from dejaq.broker.context import BrokerContext
from dejaq.broker.cron import entries
from dejaq.core.clock import now_ms
from dejaq.proto import dejaq_pb2 as pb


async def cluster_status(
    broker: BrokerContext, req: pb.ClusterStatusRequest
) -> pb.ClusterStatusResponse:
    coordinator = broker.coordinator
    view = coordinator.view()
    resp = pb.ClusterStatusResponse(
        mode=view.mode,
        cluster=view.cluster,
        broker=view.broker,
        healthy=view.healthy,
        now_ms=now_ms(),
    )
    for b in view.brokers:
        status = resp.brokers.add(id=b.id, address=b.address, started_at_ms=b.started_ms)
        if b.skew_ms is not None:
            status.skew_ms = b.skew_ms
    # Bucket counts come from storage, the source of truth for topics.
    for topic in entries.users_topics(await broker.storage.list_topics()):
        count = topic.settings.buckets
        t = resp.topics.add(name=topic.name, buckets=count)
        for owner in coordinator.ownership(topic.name, count):
            c = t.consumers.add(id=owner.consumer, broker=owner.broker)
            for first, last in as_ranges(owner.buckets):
                c.buckets.add(first=first, last=last)
    return resp
