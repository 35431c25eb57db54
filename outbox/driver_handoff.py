"""The hand-over of a relay of its own: through the public driver, to any broker."""

from __future__ import annotations

from collections.abc import Sequence

from dejaq.core import headers as header_codec
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from dejaq.outbox.relay.claimed import Claimed
from dejaq.outbox.relay.handoff import HandOff, reason


class DriverHandOff(HandOff):
    """Produces through one stream a topic, kept between batches."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.admin = Admin(client)
        self.producers: dict[str, Producer] = {}

    async def close(self) -> None:
        for producer in self.producers.values():
            await producer.close()
        self.producers.clear()

    async def send(self, topic: str, rows: Sequence[Claimed]) -> list[str | None]:
        producer = self.producers.get(topic)
        if producer is None:
            producer = self.producers[topic] = Producer(self.client, topic)
        try:
            results = await producer.send_batch([_outgoing(row) for row in rows])
        except BaseException:
            # The stream may be spent: the next batch opens a new one.
            del self.producers[topic]
            await producer.close()
            raise
        return [
            None
            if result.accepted or result.status.name == "DUPLICATE"
            else reason(result.error)
            if result.error
            else "refused"
            for result in results
        ]

    async def version(self, topic: str, id: str) -> int:
        return (await self.admin.get(topic, id)).message.version

    async def move(self, topic: str, id: str, version: int, at_ms: int) -> None:
        await self.admin.move(topic, id, version, at_ms)

    async def cancel(self, topic: str, id: str, version: int) -> None:
        await self.admin.cancel(topic, id, version)


def _outgoing(row: Claimed) -> Outgoing:
    return Outgoing(
        row.payload,
        row.at_ms,
        row.msg_id,
        row.max_deliveries,
        row.expires_at_ms,
        row.priority,
        row.key,
        header_codec.decode(row.headers) if row.headers else None,
    )
