"""A producer's resend after failover, through the public driver: a message
already acked, cancelled or delivered at most once is not scheduled again while
its topic's dedup window lasts."""

from __future__ import annotations

from pathlib import Path

from dejaq.core.model import InsertStatus
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing, Producer
from tests.e2e.broker_process import StartBroker
from tests.e2e.support import consuming, create_topic, now_ms


async def test_a_resend_after_failover_does_not_deliver_again(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    # Given two brokers on one store, a producer that knows both (the first
    # first), and a consumer on the second
    url = f"sqlite:///{tmp_path / 'd.db'}"
    first, second = start_broker(url), start_broker(url)
    async with (
        Client(f"{first.address},{second.address}") as producing,
        Client(second.address) as consuming_client,
    ):
        topic = await create_topic(producing, "resent", max_deliveries=0)
        messages = [
            Outgoing(b"acked", now_ms(), id="acked"),
            Outgoing(b"once", now_ms(), id="once", max_deliveries=1),
            Outgoing(b"cancelled", now_ms() + 60_000, id="cancelled"),
        ]
        async with Producer(producing, topic) as producer:
            sent = await producer.send_batch(messages)
            assert [r.status for r in sent] == [InsertStatus.ACCEPTED] * 3
            # and the messages are done with: one acked, one delivered at most
            # once, one cancelled
            async with consuming(consuming_client, topic) as inbox:
                got = {d.id: d for d in await inbox.take(2, timeout_s=5)}
                assert set(got) == {"acked", "once"}
                await got["acked"].ack(confirm=True)
                admin = Admin(consuming_client)
                version = (await admin.get(topic, "cancelled")).message.version
                await admin.cancel(topic, "cancelled", version)
                # When the first broker dies and the producer resends the batch
                assert first.kill() == -9
                resent = await producer.send_batch(messages)
                # Then every one is a duplicate, stored nothing, and is not delivered again
                assert [r.status for r in resent] == [InsertStatus.DUPLICATE] * 3
                assert (await admin.describe_topic(topic)).counts.waiting == 0
                await inbox.quiet_for(0.5)
