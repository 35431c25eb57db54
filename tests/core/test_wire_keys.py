"""Keys and headers in the columnar batches: written and read against the
classes flatc generates (the reference), left out where no message has one,
and a frame of the previous release (without them) read as none."""

from __future__ import annotations

import flatbuffers
import numpy as np
import pytest

from dejaq.core import headers
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import LeasedMessage
from dejaq.core.wire.batches import (
    decode_deliveries,
    decode_delivery_columns,
    decode_messages,
    delivery_frames,
    encode_deliveries,
    encode_messages,
    messages_frame_at_most,
)
from dejaq.fbs.batch import DeliveryBatch, MessageBatch

TRACE = headers.encode({"traceparent": "00-4bf92f3577b34da6-00f067aa0ba902b7-01"})
TYPED = headers.encode({"content-type": "application/json", "schema": "v2"})


def _offsets(items: list[bytes]) -> list[int]:
    out = [0]
    for i in items:
        out.append(out[-1] + len(i))
    return out


def test_a_message_batch_carries_keys_and_headers_the_reference_reads() -> None:
    # given three messages, one keyed in UTF-8, one with headers, one with both
    keys = ["tenant-é", "", "user-7"]
    heads = [b"", TRACE, TYPED]
    # when they are encoded
    buf = encode_messages([1, 2, 3], [b"a", b"b", b"c"], ["x", "y", "z"], keys=keys, headers=heads)
    # then the generated classes read each column as written
    ref = MessageBatch.MessageBatch.GetRootAs(buf, 0)
    raw_keys = [k.encode() for k in keys]
    assert ref.KeyOffsetsAsNumpy().tolist() == _offsets(raw_keys)
    assert bytes(ref.KeysAsNumpy()) == b"".join(raw_keys)
    assert ref.HeaderOffsetsAsNumpy().tolist() == _offsets(heads)
    assert bytes(ref.HeadersAsNumpy()) == b"".join(heads)
    # and decoding gives each message its own
    batch = decode_messages(buf)
    assert batch.keys == raw_keys
    assert batch.headers == heads


def test_columns_nobody_fills_are_left_out() -> None:
    # given messages whose keys and headers are all empty
    buf = encode_messages([1, 2], [b"a", b"b"], keys=["", ""], headers=[b"", b""])
    # then the frame has neither vector, and decodes as none
    ref = MessageBatch.MessageBatch.GetRootAs(buf, 0)
    assert ref.KeyOffsetsIsNone() and ref.KeysIsNone()
    assert ref.HeaderOffsetsIsNone() and ref.HeadersIsNone()
    batch = decode_messages(buf)
    assert batch.keys is None and batch.headers is None
    assert buf == encode_messages([1, 2], [b"a", b"b"])


def _reference_message_batch(keys: list[bytes] | None, heads: list[bytes] | None) -> bytes:
    b = flatbuffers.Builder(256)
    ts = b.CreateNumpyVector(np.asarray([5, 6], dtype=np.int64))
    pay_off = b.CreateNumpyVector(np.asarray([0, 1, 2], dtype=np.uint32))
    pay = b.CreateByteVector(b"pq")
    vectors = []
    for column in (keys, heads):
        if column is not None:
            off = b.CreateNumpyVector(np.asarray(_offsets(column), dtype=np.uint32))
            vectors.append((off, b.CreateByteVector(b"".join(column))))
    MessageBatch.Start(b)
    MessageBatch.AddTimestamps(b, ts)
    MessageBatch.AddPayloadOffsets(b, pay_off)
    MessageBatch.AddPayloads(b, pay)
    if keys is not None:
        MessageBatch.AddKeyOffsets(b, vectors[0][0])
        MessageBatch.AddKeys(b, vectors[0][1])
    if heads is not None:
        MessageBatch.AddHeaderOffsets(b, vectors[-1][0])
        MessageBatch.AddHeaders(b, vectors[-1][1])
    b.Finish(MessageBatch.End(b))
    return bytes(b.Output())


def test_a_frame_of_the_reference_decodes_with_its_keys_and_headers() -> None:
    # given a frame built by the generated classes, one key not UTF-8
    buf = _reference_message_batch([b"k", b"\xff\xfe"], [TRACE, b""])
    # then the frame decodes: each key is kept as sent, for the broker to judge per message
    batch = decode_messages(buf)
    assert batch.keys == [b"k", b"\xff\xfe"]
    assert batch.headers == [TRACE, b""]


def test_a_frame_of_the_previous_release_has_no_keys_nor_headers() -> None:
    batch = decode_messages(_reference_message_batch(None, None))
    assert batch.payloads == [b"p", b"q"]
    assert batch.keys is None and batch.headers is None


@pytest.mark.parametrize(
    ("keys", "heads"),
    [([b"k"], None), ([b"k", b"l", b"m"], None), (None, [b"", b"", b""])],
)
def test_key_or_header_offsets_that_do_not_match_the_messages_are_refused(
    keys: list[bytes] | None, heads: list[bytes] | None
) -> None:
    with pytest.raises(InvalidArgument, match="offsets"):
        decode_messages(_reference_message_batch(keys, heads))


def test_a_delivery_batch_carries_keys_and_headers_the_reference_reads() -> None:
    # given leased messages with and without keys and headers
    sent = [
        LeasedMessage("a", 1, b"p", 3, 1, 0, "campaign-1", TYPED),
        LeasedMessage("b", 2, b"", 4, 2, 0, "", b""),
        LeasedMessage("c", 3, b"q", 5, 1, 0, "ユーザー", TRACE),
    ]
    buf = encode_deliveries(sent, 99)
    # then the generated classes read the columns
    ref = DeliveryBatch.DeliveryBatch.GetRootAs(buf, 0)
    raw_keys = [m.key.encode() for m in sent]
    assert ref.KeyOffsetsAsNumpy().tolist() == _offsets(raw_keys)
    assert bytes(ref.KeysAsNumpy()) == b"".join(raw_keys)
    assert ref.HeaderOffsetsAsNumpy().tolist() == _offsets([m.headers for m in sent])
    # and the driver's reader gives them back, message by message
    assert decode_deliveries(buf) == (sent, 99)
    columns = decode_delivery_columns(buf)
    assert columns.keys == ["campaign-1", "", "ユーザー"]
    assert columns.headers == [TYPED, b"", TRACE]


def test_deliveries_without_keys_or_headers_leave_the_vectors_out() -> None:
    sent = [LeasedMessage("a", 1, b"p", 3, 1), LeasedMessage("b", 2, b"", 4, 2)]
    buf = encode_deliveries(sent, 7)
    ref = DeliveryBatch.DeliveryBatch.GetRootAs(buf, 0)
    assert ref.KeyOffsetsIsNone() and ref.KeysIsNone()
    assert ref.HeaderOffsetsIsNone() and ref.HeadersIsNone()
    columns = decode_delivery_columns(buf)
    assert columns.keys is None and columns.headers is None


def test_a_delivery_key_that_is_not_utf8_makes_the_frame_malformed() -> None:
    b = flatbuffers.Builder(128)
    ts = b.CreateNumpyVector(np.asarray([1], dtype=np.int64))
    ver = b.CreateNumpyVector(np.asarray([1], dtype=np.uint64))
    dl = b.CreateNumpyVector(np.asarray([1], dtype=np.uint32))
    id_off = b.CreateNumpyVector(np.asarray([0, 1], dtype=np.uint32))
    ids = b.CreateByteVector(b"i")
    pay_off = b.CreateNumpyVector(np.asarray([0, 0], dtype=np.uint32))
    pay = b.CreateByteVector(b"")
    key_off = b.CreateNumpyVector(np.asarray([0, 1], dtype=np.uint32))
    key = b.CreateByteVector(b"\xff")
    DeliveryBatch.Start(b)
    DeliveryBatch.AddTimestamps(b, ts)
    DeliveryBatch.AddVersions(b, ver)
    DeliveryBatch.AddDeliveries(b, dl)
    DeliveryBatch.AddIdOffsets(b, id_off)
    DeliveryBatch.AddIds(b, ids)
    DeliveryBatch.AddPayloadOffsets(b, pay_off)
    DeliveryBatch.AddPayloads(b, pay)
    DeliveryBatch.AddKeyOffsets(b, key_off)
    DeliveryBatch.AddKeys(b, key)
    b.Finish(DeliveryBatch.End(b))
    with pytest.raises(InvalidArgument, match="malformed DeliveryBatch"):
        decode_delivery_columns(bytes(b.Output()))


def test_headers_count_toward_a_delivery_frame_size() -> None:
    # given messages whose payloads are small but whose headers are 8 KiB each
    big = headers.encode({"x-big": "v" * 8000})
    sent = [LeasedMessage(f"m{i}", i, b"", 1, 1, 0, "k", big) for i in range(100)]
    # when cut into frames of 100 KB, then every frame keeps within it
    frames = delivery_frames(sent, 5, 100_000)
    assert len(frames) > 1
    assert all(len(frame) <= 100_000 for frame, _ in frames)
    assert [m for _, carried in frames for m in carried] == sent


def test_the_frame_bound_covers_keys_and_headers() -> None:
    keys = ["k" * 256] * 10
    heads = [TRACE] * 10
    buf = encode_messages([1] * 10, [b"p"] * 10, ["i"] * 10, keys=keys, headers=heads)
    extra = sum(map(len, heads)) + 256 * 10
    assert len(buf) <= messages_frame_at_most(10, 10, 10, 0, extra)
