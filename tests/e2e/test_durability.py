"""A broker on SQLite, stopped hard and softly: after ``kill -9`` an acknowledged
produce is never lost, an acknowledged ack is never undone, and a lease held at
the crash still expires; SIGTERM stops it cleanly with consumers attached.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dejaq.core.errors import NotFound
from dejaq.driver.admin import Admin
from dejaq.driver.client import Client
from dejaq.driver.producer import Outgoing
from tests.e2e.broker_process import StartBroker
from tests.e2e.support import (
    EMPTY,
    ChildConsumer,
    ack_all,
    consuming,
    counts,
    create_topic,
    now_ms,
    produce,
    produce_one,
)

N = 500


async def test_kill_9_loses_no_acknowledged_produce_and_undoes_no_ack(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'd.db'}"
    first = start_broker(url)
    async with Client(first.address) as client:
        # Given a message consumed and acked
        topic = await create_topic(client, "durable")
        await produce_one(client, topic, now_ms(), b"done", id="acked")
        async with consuming(client, topic) as inbox:
            d = await inbox.next()
            assert d.id == "acked"
            await d.ack(confirm=True)
        # and a message held under a 2 s lease by a consumer process
        await produce_one(client, topic, now_ms(), b"held", id="held")
        holder = await ChildConsumer.start(first.address, topic, count=1, lease_ms=2_000)
        # and 500 messages due 1.5 to 2 s from now, their produce just acknowledged
        due = now_ms() + 1_500
        messages = [Outgoing(b"%d" % i, due + i, id=f"m{i:03d}") for i in range(N)]
        await produce(client, topic, messages)
    # When the broker is killed with SIGKILL (and the holder dies after it)
    assert first.kill() == -9
    await holder.kill()
    # and a new broker starts on the same file
    second = start_broker(url)
    async with Client(second.address) as client:
        admin = Admin(client)
        # Then the acked message is still gone
        with pytest.raises(NotFound):
            await admin.get(topic, "acked")
        # and every produced message is delivered, on time, once
        async with consuming(client, topic) as inbox:
            got = await inbox.take(N + 1, timeout_s=20)
            by_id = {d.id: d for d in got}
            assert sorted(by_id) == sorted([m.id for m in messages] + ["held"])
            for m in messages:
                d = by_id[m.id]
                assert (d.payload, d.timestamp_ms, d.deliveries) == (m.payload, m.timestamp_ms, 1)
                assert d.received_at_ms >= d.timestamp_ms
            # and the held one once its lease ran out, as its second delivery
            held = by_id["held"]
            assert held.payload == b"held"
            assert held.deliveries == 2
            assert held.received_at_ms >= holder.lease_until["held"]
            await ack_all(got)
        assert await counts(client, topic) == EMPTY
    assert second.stop() == 0


async def test_sigterm_stops_cleanly_with_a_consumer_attached_and_keeps_its_leases(
    start_broker: StartBroker, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'd.db'}"
    first = start_broker(url, DEJAQ_GRACE_S="1")  # open streams get 1 s to finish
    async with Client(first.address) as client:
        # Given 100 waiting messages and one held by a consumer process under a 60 s lease
        topic = await create_topic(client, "graceful")
        later = now_ms() + 3_600_000
        await produce(client, topic, [Outgoing(b"", later, id=f"w{i:03d}") for i in range(100)])
        await produce_one(client, topic, now_ms(), b"held", id="held")
        holder = await ChildConsumer.start(first.address, topic, count=1, lease_ms=60_000)
    # When the broker gets SIGTERM
    code = first.stop()
    await holder.kill()
    # Then it exits cleanly, within the 10 s the fixture allows
    assert code == 0, first.log_path.read_text()
    # and a broker on the same file has every message, the held one still leased:
    # its consumer may still be working on it and come back to ack
    second = start_broker(url)
    async with Client(second.address) as client:
        admin = Admin(client)
        assert await counts(client, topic) == (100, 0, 1, 0)
        held = await admin.get(topic, "held")
        assert held.state == "leased"
        assert held.message.timestamp == holder.lease_until["held"]
