"""A delivery frame kept as columns: objects only for the messages touched, and
settles appended to the frame being gathered, one at a time or a batch at once.

The frames the batcher sends are kept and read back (no broker: the settle
columns are what is checked).
"""

from __future__ import annotations

from dejaq.core import headers as header_codec
from dejaq.core.errors import BrokerUnavailable
from dejaq.core.model import LeasedMessage
from dejaq.core.wire.batches import DeliveryColumns, decode_delivery_columns, encode_deliveries
from dejaq.driver.batch import DeliveryBatch, Frame
from dejaq.driver.delivery import Delivery
from dejaq.driver.fair_buffer import FairBuffer
from dejaq.driver.settle import SettleBatcher
from dejaq.proto import dejaq_pb2 as pb


class Wire:
    def __init__(self) -> None:
        self.frames: list[pb.Settle] = []

    def send(self, req: pb.ConsumeRequest) -> bool:
        if req.WhichOneof("frame") == "settle":
            self.frames.append(req.settle)
        return True

    def settled(self, kind: int) -> list[tuple[str, int]]:
        return [
            (i, v)
            for f in self.frames
            if f.kind == kind
            for i, v in zip(f.ids, f.versions, strict=True)
        ]


def a_batch(settler: SettleBatcher, count: int) -> DeliveryBatch:
    messages = [
        LeasedMessage(f"m{n}", 1_700_000_000_000 + n, b"p%d" % n, 7 + n, 1) for n in range(count)
    ]
    columns = decode_delivery_columns(encode_deliveries(messages, 1_700_000_100_000))
    return DeliveryBatch(Frame(columns, settler, 30_000), 0, count, 0)


async def test_a_batch_read_by_its_columns_and_acked_at_once_builds_no_delivery() -> None:
    # given a batch of three deliveries
    wire = Wire()
    settler = SettleBatcher(wire.send)
    batch = a_batch(settler, 3)
    # when the application reads its columns and acks it whole
    assert batch.ids == ["m0", "m1", "m2"]
    assert batch.payloads == [b"p0", b"p1", b"p2"]
    await batch.ack_all()
    settler.send_now()
    # then one frame acks each at its version, and no delivery object was built
    assert wire.settled(pb.Settle.ACK) == [("m0", 7), ("m1", 8), ("m2", 9)]
    assert batch.built() == []


async def test_a_message_settled_on_its_own_is_left_out_of_ack_all() -> None:
    # given a batch whose second message the application nacked on its own
    wire = Wire()
    settler = SettleBatcher(wire.send)
    batch = a_batch(settler, 3)
    assert batch[1] is batch[1]  # built once
    await batch[1].nack(50)
    # when it acks the batch, then the others are acked and the second is not
    await batch.ack_all()
    await batch.ack_all()  # nothing left to settle
    settler.send_now()
    assert wire.settled(pb.Settle.ACK) == [("m0", 7), ("m2", 9)]
    assert wire.settled(pb.Settle.NACK) == [("m1", 8)]
    assert batch.unsettled() == []


async def test_an_unconfirmed_ack_is_queued_as_it_is_called() -> None:
    # given a delivery
    wire = Wire()
    settler = SettleBatcher(wire.send)
    d = a_batch(settler, 1)[0]
    # when it is acked without waiting for the answer
    queued = d.ack()
    # then the ack is in the frame being gathered before anything awaits it
    settler.send_now()
    assert wire.settled(pb.Settle.ACK) == [("m0", 7)]
    await queued


async def test_acks_one_at_a_time_and_by_batch_settle_in_one_frame_then_the_next() -> None:
    # given a batch acked whole and a delivery of another batch acked on its own
    wire = Wire()
    settler = SettleBatcher(wire.send)
    first, second = a_batch(settler, 2), a_batch(settler, 2)
    await first.ack_all()
    await second[0].ack()
    # when the frame leaves, and the next delivery is acked after it
    settler.send_now()
    await second[1].ack()
    settler.send_now()
    # then the first frame held all three acks, and the next one only the last
    assert [list(f.ids) for f in wire.frames] == [["m0", "m1", "m0"], ["m1"]]
    # and an ack queued when the settler is abandoned fails (with the four sent
    # and unanswered), and is not sent later
    third = a_batch(settler, 1)[0]
    await third.ack()
    settler.abandon(BrokerUnavailable("gone"))
    await a_batch(settler, 1)[0].nack()
    settler.send_now()
    assert [list(f.ids) for f in wire.frames][2:] == [["m0"]]
    assert wire.frames[2].kind == pb.Settle.NACK
    assert [f.kind for f in settler.take_failures()] == ["ack"] * 5


def test_a_frame_without_keys_takes_its_turn_as_one_key() -> None:
    # given a frame without keys buffered as one run, then a delivery of key "k"
    settler = SettleBatcher(Wire().send)
    buffer: FairBuffer[Delivery] = FairBuffer()
    run = a_batch(settler, 3)
    buffer.add_run("", run, run.build)
    buffer.extend([Delivery("k0", 0, b"", 1, 1, 0, 0, settler, 1, 0, "k")])
    # when the application takes them one at a time, then the key's goes second
    assert [buffer.popleft().id for _ in range(4)] == ["m0", "k0", "m1", "m2"]
    # and a run alone in the buffer is taken whole, its rest built by no one
    other = a_batch(settler, 2)
    buffer.add_run("", other, other.build)
    rest = buffer.take_batch()
    assert isinstance(rest, DeliveryBatch) and rest.ids == ["m0", "m1"] and rest.built() == []
    assert not buffer


def test_a_batch_reads_the_same_columns_from_its_frame_or_from_built_deliveries() -> None:
    # given a stretch of a frame's batch, and the same deliveries built already
    settler = SettleBatcher(Wire().send)
    stretch = a_batch(settler, 4)[1:3]
    built = DeliveryBatch.of(list(a_batch(settler, 4)[1:3]))
    # when the application reads their columns, then both say the same
    for batch in (stretch, built):
        assert batch.ids == ["m1", "m2"]
        assert batch.timestamps == [1_700_000_000_001, 1_700_000_000_002]
        assert batch.payloads == [b"p1", b"p2"]
    assert stretch.built() == []


def keyed_columns(first: int) -> DeliveryColumns:
    """A frame of three deliveries of three keys, the second with headers."""
    messages = [
        LeasedMessage(f"m{n}", 1_700_000_000_000 + n, b"p", 7, 1, 0, f"user-{n}", b"")
        for n in range(first, first + 3)
    ]
    messages[1] = messages[1]._replace(headers=header_codec.encode({"h": "v"}))
    return decode_delivery_columns(encode_deliveries(messages, 1_700_000_100_000))


def test_a_frame_of_many_keys_joins_the_buffer_with_nothing_built() -> None:
    # given a frame of three deliveries of three keys
    settler = SettleBatcher(Wire().send)
    buffer: FairBuffer[Delivery] = FairBuffer()
    batch = DeliveryBatch(Frame(keyed_columns(0), settler, 30_000), 0, 3, 0)
    assert batch.keys == ["user-0", "user-1", "user-2"]
    # when it joins the buffer by its keys column
    buffer.add_keyed(batch, batch.keys, batch.build)
    # then no delivery object is built until one is taken, and alone in the
    # buffer it is taken whole, in one piece, still unbuilt
    assert batch.built() == []
    rest = buffer.take_batch()
    assert isinstance(rest, DeliveryBatch) and rest.ids == ["m0", "m1", "m2"]
    assert rest.built() == [] and not buffer
    # and another frame's, taken one at a time, are built with each key and headers
    other = DeliveryBatch(Frame(keyed_columns(3), settler, 30_000), 0, 3, 0)
    buffer.add_keyed(other, ["user-3", "user-4", "user-5"], other.build)
    taken = [buffer.popleft() for _ in range(3)]
    assert [(d.id, d.key, d.headers) for d in taken] == [
        ("m3", "user-3", {}),
        ("m4", "user-4", {"h": "v"}),
        ("m5", "user-5", {}),
    ]
    assert not buffer
