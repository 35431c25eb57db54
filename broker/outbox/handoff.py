"""The hand-over of a relay the broker runs: straight into its own handlers,
with the checks, rules and metrics a produced, moved or cancelled message gets
over the wire. The operator named the outbox (``--outbox``): its rows act with
the broker's own authority, as a cron entry's firings do."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from dejaq.broker.api import control, produce
from dejaq.broker.context import BrokerContext
from dejaq.core.model import InsertStatus
from dejaq.core.wire.batches import ProduceBatch, decode_results
from dejaq.outbox.relay.claimed import Claimed
from dejaq.outbox.relay.handoff import HandOff
from dejaq.proto import dejaq_pb2 as pb


class BrokerHandOff(HandOff):
    def __init__(self, broker: BrokerContext) -> None:
        self.broker = broker

    async def send(self, topic: str, rows: Sequence[Claimed]) -> list[str | None]:
        reasons: list[str | None] = []
        for part in self._frames(rows):
            response = await produce.produce_decoded(self.broker, topic, _batch(part))
            status, _ = decode_results(response.results)
            refused = {r.index: f"{r.kind}: {r.reason}" for r in response.rejections}
            for i, st in enumerate(status):
                ok = st in (InsertStatus.ACCEPTED, InsertStatus.DUPLICATE)
                reasons.append(None if ok else refused.get(i, "refused"))
        return reasons

    async def version(self, topic: str, id: str) -> int:
        found = await control.get_message(self.broker, pb.GetMessageRequest(topic=topic, id=id))
        return int(found.version)

    async def move(self, topic: str, id: str, version: int, at_ms: int) -> None:
        req = pb.MoveRequest(topic=topic, id=id, version=version, timestamp_ms=at_ms)
        await control.move(self.broker, req)

    async def cancel(self, topic: str, id: str, version: int) -> None:
        await control.cancel(self.broker, pb.CancelRequest(topic=topic, id=id, version=version))

    def _frames(self, rows: Sequence[Claimed]) -> Iterator[Sequence[Claimed]]:
        """``rows`` in parts within the broker's produce frame caps."""
        most = self.broker.config.max_produce_messages
        room = self.broker.config.max_produce_bytes // 2  # the frame's own bytes beside
        start, size = 0, 0
        for i, row in enumerate(rows):
            cost = len(row.payload) + len(row.headers) + len(row.msg_id) + len(row.key) + 64
            if i > start and (i - start >= most or size + cost > room):
                yield rows[start:i]
                start, size = i, 0
            size += cost
        if start < len(rows):
            yield rows[start:]


def _batch(rows: Sequence[Claimed]) -> ProduceBatch:
    keyed = any(row.key for row in rows)
    with_headers = any(row.headers for row in rows)
    return ProduceBatch(
        [row.at_ms for row in rows],
        [row.msg_id for row in rows],
        [row.payload for row in rows],
        [row.max_deliveries for row in rows],
        [row.expires_at_ms for row in rows],
        [row.priority for row in rows],
        [row.key.encode() for row in rows] if keyed else None,
        [row.headers for row in rows] if with_headers else None,
    )
