"""A memory lease pass reaches its consumer's frames as columns: through the
dispatcher's window and into DeliveryBatch frames without an object per
message; a pass leased as a list (the other backends) reaches the same frames."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from dejaq.broker.api.consume import Session
from dejaq.broker.dispatch.window import Window
from dejaq.core import deliveries as deliveries_module
from dejaq.core.deliveries import Deliveries
from dejaq.core.model import LeasedMessage, Leases, NewMessage, Topic
from dejaq.core.wire.batches import decode_delivery_columns
from dejaq.storage_plugins.base import LeaseRequest
from dejaq.storage_plugins.memory import MemoryStorage

NOW = 1_800_000_000_000
TOPIC = Topic("t")
# Due now or within the look-ahead; a key and headers on some only.
GIVEN = [
    NewMessage("late", NOW + 3, b"p-late", 0),
    NewMessage("now", NOW, b"p-now", 0, key="tenant"),
    NewMessage("early", NOW - 5, b"p-early", 0, headers=b"\x01h"),
    NewMessage("soon", NOW + 1, b"p-soon", 0),
]
# Ids, due times, keys and headers in due order.
EXPECTED = [
    ("early", NOW - 5, "", b"\x01h"),
    ("now", NOW, "tenant", b""),
    ("soon", NOW + 1, "", b""),
    ("late", NOW + 3, "", b""),
]


async def a_leased_pass() -> Leases:
    storage = MemoryStorage()
    await storage.open()
    await storage.create_topic(TOPIC)
    await storage.insert(TOPIC.name, GIVEN)
    return await storage.lease(LeaseRequest.of(TOPIC.name, None, NOW, 10, 30_000, "c1", 0, 5))


async def frames_through_the_window(
    leases: Leases, at: Sequence[int], max_frame_bytes: int = 1 << 20
) -> list[list[tuple[str, int, str, bytes]]]:
    """What the consumer is sent at each of ``at``: one list per frame of
    (id, due, key, headers), each checked against its payloads and versions."""
    session = Session(TOPIC, "c1", 30_000, 100, max_frame_bytes, 100)
    window: Window[Session] = Window()
    window.hold(session, leases)
    sent: list[list[tuple[str, int, str, bytes]]] = []
    for now in at:
        for _, due in window.due(now):
            session.deliver(due)
        while session.outbox.held_bytes:
            response = await session.outbox.get()
            assert response is not None
            c = decode_delivery_columns(response.deliveries)
            assert c.payloads == [b"p-" + i.encode() for i in c.ids]
            assert c.versions == [2] * len(c.ids) and c.deliveries == [1] * len(c.ids)
            assert c.lease_until == leases.lease_until
            keys = c.keys or [""] * len(c.ids)
            heads = c.headers or [b""] * len(c.ids)
            sent.append(list(zip(c.ids, c.timestamps, keys, heads, strict=True)))
    return sent


async def test_a_memory_pass_reaches_its_frames_without_a_message_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # given a memory topic's lease pass, with a look-ahead
    leases = await a_leased_pass()
    # and any LeasedMessage made from its columns is seen
    made: list[object] = []

    def seen(*fields: object) -> object:
        made.append(fields)
        return LeasedMessage(*fields)  # type: ignore[arg-type]

    monkeypatch.setattr(deliveries_module, "LeasedMessage", seen)
    # when it goes through the window at NOW, then at NOW + 3
    sent = await frames_through_the_window(leases, [NOW, NOW + 3])
    # then what is due leaves first, the rest at its millisecond, in due order
    assert sent == [EXPECTED[:2], EXPECTED[2:]]
    # and storage leased the pass as columns, and no message object was made
    assert isinstance(leases.delivered, Deliveries)
    assert made == []


async def test_a_pass_leased_as_a_list_reaches_the_same_frames() -> None:
    # given the same pass as a list of messages (as the row-by-row backends lease)
    leases = await a_leased_pass()
    listed = Leases(list(leases.delivered)[::-1], leases.lease_until)
    # when it goes through the window, in frames of one message each
    sent = await frames_through_the_window(listed, [NOW + 3], max_frame_bytes=1)
    # then each message leaves in its own frame, in due order
    assert sent == [[e] for e in EXPECTED]
