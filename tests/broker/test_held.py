"""The ledger of bytes held for consumers: every outbox's waiting delivery
frames counted once, given back as they are sent or taken back, and the
greediest outbox cut off when all together hold too much."""

from __future__ import annotations

from dejaq.broker.dispatch.held import HeldBytes
from dejaq.broker.dispatch.outbox import Outbox
from dejaq.core.errors import ResourceExhausted
from dejaq.core.model import LeasedMessage
from dejaq.proto import dejaq_pb2 as pb

FAR = 4_102_444_800_000


def delivery(outbox: Outbox, size: int) -> None:
    message = LeasedMessage("m", 1, b"", 1, 1)
    outbox.put(pb.ConsumeResponse(deliveries=b"d"), [message], FAR, size)


async def test_what_is_sent_or_taken_back_is_no_longer_held() -> None:
    ledger = HeldBytes(1000)
    a, b = Outbox("a", 100, ledger), Outbox("b", 100, ledger)
    # Given deliveries waiting for two consumers, and a frame that holds nothing
    delivery(a, 300)
    delivery(a, 200)
    delivery(b, 100)
    a.put(pb.ConsumeResponse(settled=pb.SettleResult(token=1)))
    assert (ledger.total, a.held_bytes, b.held_bytes) == (600, 500, 100)
    # When one frame is sent and the other consumer's stream ends
    assert (await a.get()) is not None
    assert len(b.take_deliveries(0)) == 1
    # Then only what still waits is held, and the gone consumer no longer counts
    assert (ledger.total, a.held_bytes, b.held_bytes) == (200, 200, 0)
    assert len(a.take_deliveries(0)) == 1
    assert ledger.total == 0


async def test_past_the_bound_the_greediest_is_cut_off_and_no_longer_counted() -> None:
    ledger = HeldBytes(1000)
    cut: list[tuple[str, ResourceExhausted]] = []
    boxes = {name: Outbox(name, 100, ledger) for name in ("a", "b", "c")}
    for name, box in boxes.items():
        box.on_cut_off = lambda exc, name=name: cut.append((name, exc))
    delivery(boxes["a"], 300)
    delivery(boxes["b"], 500)
    assert not cut
    # When a third consumer's delivery takes the total over the bound
    delivery(boxes["c"], 400)
    # Then the one holding the most is cut off, once, and the rest fit
    assert [name for name, _ in cut] == ["b"]
    assert "--max-held-bytes" in str(cut[0][1])
    assert ledger.total == 700
    # and what it still holds, when its stream gives it back, is not counted twice
    assert len(boxes["b"].take_deliveries(0)) == 1
    assert ledger.total == 700
    # A consumer alone over the bound is cut off too
    delivery(boxes["a"], 2000)
    assert [name for name, _ in cut] == ["b", "a"]
    assert ledger.total == 400
