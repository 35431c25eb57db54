"""The cluster as a broker sees it: ``ClusterStatus``, as plain data."""

from __future__ import annotations

from dataclasses import dataclass, field

from dejaq.driver.client import Client
from dejaq.proto import dejaq_pb2 as pb


@dataclass(frozen=True)
class BrokerStatus:
    id: str
    address: str
    started_at_ms: int
    skew_ms: int | None  # its clock minus the answering broker's; None = not measured yet


@dataclass(frozen=True)
class ConsumerStatus:
    id: str
    broker: str
    buckets: list[tuple[int, int]]  # inclusive ranges

    @property
    def bucket_count(self) -> int:
        return sum(last - first + 1 for first, last in self.buckets)


@dataclass(frozen=True)
class TopicStatus:
    name: str
    buckets: int
    consumers: list[ConsumerStatus] = field(default_factory=list)


@dataclass(frozen=True)
class ClusterStatus:
    mode: str  # "single" | "etcd"
    cluster: str
    broker: str  # the broker that answered
    healthy: bool  # it reaches etcd
    now_ms: int  # its clock
    brokers: list[BrokerStatus]
    topics: list[TopicStatus]


async def cluster_status(client: Client) -> ClusterStatus:
    """Ask the client's current broker for its view of the cluster."""
    r = await client.call("ClusterStatus", pb.ClusterStatusRequest())
    return ClusterStatus(
        r.mode,
        r.cluster,
        r.broker,
        r.healthy,
        r.now_ms,
        [
            BrokerStatus(
                b.id, b.address, b.started_at_ms, b.skew_ms if b.HasField("skew_ms") else None
            )
            for b in r.brokers
        ],
        [
            TopicStatus(
                t.name,
                t.buckets,
                [
                    ConsumerStatus(c.id, c.broker, [(br.first, br.last) for br in c.buckets])
                    for c in t.consumers
                ],
            )
            for t in r.topics
        ],
    )
