"""What the in-process cron stories share: the timeline, the start, moving the
clock on with a consumer, and adding an entry."""

from __future__ import annotations

from dejaq.broker.context import BrokerContext
from dejaq.broker.cron import control as cron
from dejaq.proto import dejaq_pb2 as pb
from tests.broker.inprocess import ManualClock, Session, settle_down

T = "reports"
START = 1_800_000_000_000  # a whole minute


def occurred_at(delivery_id: str) -> int:
    """The occurrence time in an occurrence's id (``ENTRY@EPOCH_MS``)."""
    return int(delivery_id.rsplit("@", 1)[1])


async def run_for(clock: ManualClock, session: Session, ms: int, step: int = 100) -> None:
    """Move the clock on, checking at each step that nothing arrived early (by
    its occurrence time, and by the time it shows), and acking what arrived
    (with the credit back)."""
    for _ in range(ms // step):
        acked = len(session.deliveries)
        clock.advance(step)
        await settle_down()
        fresh = session.deliveries[acked:]
        assert all(d.timestamp <= clock.now for d in fresh), "delivered early"
        assert all(occurred_at(d.id) <= clock.now for d in fresh), "delivered early"
        if fresh:
            session.ack(fresh, credits=len(fresh))
            await settle_down()


async def add(
    broker: BrokerContext, id: str, schedule: str, topic: str = T, **kw: object
) -> pb.CronEntry:
    req = pb.CronEntry(topic=topic, id=id, schedule=schedule, payload=b"p", **kw)  # type: ignore[arg-type]
    return await cron.add(broker, req)
