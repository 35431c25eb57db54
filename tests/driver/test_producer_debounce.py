"""``Producer`` with ``on_duplicate``: one message or a batch replaces or extends
the waiting message of its id; a batch that mixes modes goes in a frame each
and answers in its order; a mode there is not is refused before anything goes."""

from __future__ import annotations

import time

import pytest

from dejaq.core.model import InsertStatus
from dejaq.driver import Admin, InvalidArgument, Producer, embedded
from dejaq.driver.producer import Outgoing

pytestmark = pytest.mark.timeout(60)


async def test_send_and_a_mixed_batch_replace_and_extend() -> None:
    later = int(time.time() * 1000) + 3_600_000
    async with embedded("memory://") as client:
        admin = Admin(client)
        await admin.create_topic("digests")
        async with Producer(client, "digests") as producer:
            await producer.send(b"v1", at_ms=later, id="a")
            await producer.send(b"v1", at_ms=later, id="b")
            # When "a" is replaced by one send, and a batch extends "b" and keeps "a"
            replaced = await producer.send(b"v2", at_ms=later + 1, id="a", on_duplicate="replace")
            results = await producer.send_batch(
                [
                    Outgoing(b"v3", later + 2, "b", on_duplicate="extend"),
                    Outgoing(b"v4", later + 3, "a"),
                    Outgoing(b"v5", later + 4, "c", on_duplicate="replace"),
                ]
            )
            # Then each answer says what became of its message, in the batch's order
            assert replaced.status == InsertStatus.REPLACED
            assert [(r.id, r.status) for r in results] == [
                ("b", InsertStatus.EXTENDED),
                ("a", InsertStatus.DUPLICATE),
                ("c", InsertStatus.ACCEPTED),
            ]
            with pytest.raises(InvalidArgument, match="on_duplicate must be one of"):
                await producer.send(b"v6", at_ms=later, id="a", on_duplicate="merge")
        a, b = await admin.get("digests", "a"), await admin.get("digests", "b")
        assert (a.message.payload, a.message.timestamp, a.message.version) == (b"v2", later + 1, 2)
        assert (b.message.payload, b.message.timestamp, b.message.version) == (b"v1", later + 2, 2)
