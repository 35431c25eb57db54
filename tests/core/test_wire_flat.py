"""The hand-laid FlatBuffers codec (core/wire/flat.py) against the classes flatc
generates from fbs/batch.fbs, the reference: what one writes the other reads,
both ways, for every table; vectors are aligned as the format asks; offsets
that leave the frame are refused."""

from __future__ import annotations

import struct

import flatbuffers
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dejaq.core.errors import InvalidArgument
from dejaq.core.model import LeasedMessage
from dejaq.core.wire.batches import (
    decode_delivery_columns,
    decode_messages,
    decode_results,
    encode_deliveries,
    encode_messages,
    encode_results,
)
from dejaq.core.wire.flat import Reader, write_table
from dejaq.fbs.batch import DeliveryBatch, MessageBatch, ProduceResults
from tests.fuzz.budget import examples

ids = st.lists(st.text(max_size=10), min_size=0, max_size=8)
i64 = st.integers(-(2**63), 2**63 - 1)
u32 = st.integers(0, 2**32 - 1)


def _offsets(items: list[bytes]) -> list[int]:
    out = [0]
    for i in items:
        out.append(out[-1] + len(i))
    return out


def _text(b: flatbuffers.Builder, items: list[str]) -> tuple[int, int]:
    raw = [i.encode() for i in items]
    off = b.CreateNumpyVector(np.asarray(_offsets(raw), dtype=np.uint32))
    return off, b.CreateByteVector(b"".join(raw))


@settings(max_examples=examples(100))
@given(data=st.data(), texts=ids)
def test_a_message_batch_reads_the_same_both_ways(data: st.DataObject, texts: list[str]) -> None:
    n = len(texts)
    ts = data.draw(st.lists(i64, min_size=n, max_size=n))
    pays = data.draw(st.lists(st.binary(max_size=20), min_size=n, max_size=n))
    md = data.draw(st.none() | st.lists(u32, min_size=n, max_size=n))
    pri = data.draw(st.none() | st.lists(u32, min_size=n, max_size=n))

    ours = MessageBatch.MessageBatch.GetRootAs(encode_messages(ts, pays, texts, md, None, pri), 0)
    assert ours.TimestampsAsNumpy().tolist() == ts if n else ours.TimestampsLength() == 0
    assert bytes(ours.PayloadsAsNumpy()) == b"".join(pays) if n else True
    assert ours.PayloadOffsetsAsNumpy().tolist() == _offsets(pays)
    assert ours.IdOffsetsAsNumpy().tolist() == _offsets([t.encode() for t in texts])
    assert ours.ExpiresAtIsNone()
    assert ours.MaxDeliveriesIsNone() == (md is None)
    if md is not None and n:
        assert ours.MaxDeliveriesAsNumpy().tolist() == md
    if pri is not None and n:
        assert ours.PrioritiesAsNumpy().tolist() == pri

    b = flatbuffers.Builder(64)
    t = b.CreateNumpyVector(np.asarray(ts, dtype=np.int64))
    id_cols = _text(b, texts)
    pay_off = b.CreateNumpyVector(np.asarray(_offsets(pays), dtype=np.uint32))
    pay = b.CreateByteVector(b"".join(pays))
    m = b.CreateNumpyVector(np.asarray(md, dtype=np.uint32)) if md is not None else None
    MessageBatch.Start(b)
    MessageBatch.AddTimestamps(b, t)
    MessageBatch.AddIdOffsets(b, id_cols[0])
    MessageBatch.AddIds(b, id_cols[1])
    MessageBatch.AddPayloadOffsets(b, pay_off)
    MessageBatch.AddPayloads(b, pay)
    if m is not None:
        MessageBatch.AddMaxDeliveries(b, m)
    b.Finish(MessageBatch.End(b))
    theirs = decode_messages(bytes(b.Output()))
    assert theirs.timestamps == ts
    assert theirs.payloads == pays
    assert theirs.ids == (texts if n else [])
    assert theirs.max_deliveries == (md or None)


@settings(max_examples=examples(100))
@given(data=st.data(), texts=ids)
def test_produce_results_read_the_same_both_ways(data: st.DataObject, texts: list[str]) -> None:
    status = data.draw(st.lists(st.integers(0, 2), min_size=len(texts), max_size=len(texts)))
    ours = ProduceResults.ProduceResults.GetRootAs(encode_results(status, texts), 0)
    assert ours.StatusLength() == len(status)
    assert [ours.Status(i) for i in range(len(status))] == status

    b = flatbuffers.Builder(64)
    st_vec = b.CreateNumpyVector(np.asarray(status, dtype=np.uint8))
    id_cols = _text(b, texts)
    ProduceResults.Start(b)
    ProduceResults.AddStatus(b, st_vec)
    ProduceResults.AddIdOffsets(b, id_cols[0])
    ProduceResults.AddIds(b, id_cols[1])
    b.Finish(ProduceResults.End(b))
    assert decode_results(bytes(b.Output())) == (status, texts)


@settings(max_examples=examples(100))
@given(data=st.data(), texts=st.lists(st.text(max_size=10), min_size=1, max_size=8))
def test_a_delivery_batch_reads_the_same_both_ways(data: st.DataObject, texts: list[str]) -> None:
    n = len(texts)
    sent = [
        LeasedMessage(
            t,
            data.draw(i64),
            data.draw(st.binary(max_size=20)),
            data.draw(st.integers(0, 2**64 - 1)),
            data.draw(u32),
        )
        for t in texts
    ]
    lease_until = data.draw(i64)
    ours = DeliveryBatch.DeliveryBatch.GetRootAs(encode_deliveries(sent, lease_until), 0)
    assert ours.LeaseUntil() == lease_until
    assert ours.TimestampsAsNumpy().tolist() == [m.timestamp for m in sent]
    assert ours.VersionsAsNumpy().tolist() == [m.version for m in sent]
    assert ours.DeliveriesAsNumpy().tolist() == [m.deliveries for m in sent]
    assert ours.PrioritiesIsNone()

    b = flatbuffers.Builder(64)
    t = b.CreateNumpyVector(np.asarray([m.timestamp for m in sent], dtype=np.int64))
    v = b.CreateNumpyVector(np.asarray([m.version for m in sent], dtype=np.uint64))
    d = b.CreateNumpyVector(np.asarray([m.deliveries for m in sent], dtype=np.uint32))
    id_cols = _text(b, texts)
    pays = [m.payload for m in sent]
    pay_off = b.CreateNumpyVector(np.asarray(_offsets(pays), dtype=np.uint32))
    pay = b.CreateByteVector(b"".join(pays))
    DeliveryBatch.Start(b)
    DeliveryBatch.AddTimestamps(b, t)
    DeliveryBatch.AddVersions(b, v)
    DeliveryBatch.AddDeliveries(b, d)
    DeliveryBatch.AddIdOffsets(b, id_cols[0])
    DeliveryBatch.AddIds(b, id_cols[1])
    DeliveryBatch.AddPayloadOffsets(b, pay_off)
    DeliveryBatch.AddPayloads(b, pay)
    DeliveryBatch.AddLeaseUntil(b, lease_until)
    b.Finish(DeliveryBatch.End(b))
    theirs = decode_delivery_columns(bytes(b.Output()))
    assert theirs.ids == texts
    assert theirs.payloads == pays
    assert theirs.versions == [m.version for m in sent]
    assert theirs.lease_until == lease_until
    assert theirs.priorities is None
    assert n == len(theirs.timestamps)


def _vector_data_start(buf: bytes, slot: int) -> int:
    table = struct.unpack_from("<I", buf, 0)[0]
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    field = table + struct.unpack_from("<H", buf, vtable + 4 + 2 * slot)[0]
    return field + struct.unpack_from("<I", buf, field)[0] + 4


def test_vector_elements_and_scalars_are_aligned_to_their_size() -> None:
    buf = write_table(
        [(0, b"\1", 1), (1, struct.pack("<2q", 1, 2), 8), (2, b"abc", 1), (3, b"\0" * 8, 4)],
        [(4, 7)],
    )
    assert _vector_data_start(buf, 1) % 8 == 0
    assert _vector_data_start(buf, 3) % 4 == 0
    table = struct.unpack_from("<I", buf, 0)[0]
    assert table % 8 == 0
    r = Reader(buf, "test")
    assert r.vector(1, "<i8").tolist() == [1, 2]  # type: ignore[union-attr]
    assert r.blob(2) == b"abc"
    assert r.scalar(4, struct.Struct("<q"), 0) == 7
    assert r.blob(9) is None
    assert r.scalar(9, struct.Struct("<q"), -1) == -1


@pytest.mark.parametrize(
    "patch",
    [
        (0, struct.pack("<I", 10_000)),  # the root table past the end
        (None, struct.pack("<i", -10_000)),  # the vtable past the end
    ],
    ids=["root", "vtable"],
)
def test_offsets_outside_the_frame_are_refused(patch: tuple[int | None, bytes]) -> None:
    buf = bytearray(encode_messages([1], [b"a"], ["x"]))
    at = struct.unpack_from("<I", buf, 0)[0] if patch[0] is None else patch[0]
    buf[at : at + 4] = patch[1]
    with pytest.raises(InvalidArgument, match="outside the frame"):
        decode_messages(bytes(buf))


def test_a_vector_longer_than_the_frame_is_refused() -> None:
    buf = bytearray(encode_messages([1], [b"a"], ["x"]))
    start = _vector_data_start(bytes(buf), 0)  # timestamps
    buf[start - 4 : start] = struct.pack("<I", 1_000_000)
    with pytest.raises(InvalidArgument, match="outside the frame"):
        decode_messages(bytes(buf))
