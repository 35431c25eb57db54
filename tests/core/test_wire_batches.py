"""The columnar batch codec: round trips, and malformed frames refused."""

from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dejaq.core.errors import InvalidArgument
from dejaq.core.model import LeasedMessage
from dejaq.core.wire.batches import (
    decode_deliveries,
    decode_messages,
    decode_results,
    encode_deliveries,
    encode_messages,
    encode_results,
    messages_frame_at_most,
)
from dejaq.fbs.batch import MessageBatch


def test_message_batch_round_trips_ids_payloads_and_options() -> None:
    payloads = [b"a", b"", b"\x00\xffbinary", b"x" * 70_000]
    buf = encode_messages(
        [1, 2, 3, 4],
        payloads,
        ids=["x", "", "é-ü", "z"],
        max_deliveries=[0, 1, 2, 3],
        expires_at=[0, 0, 9, 0],
    )
    batch = decode_messages(buf)
    assert batch.timestamps == [1, 2, 3, 4]
    assert batch.ids == ["x", "", "é-ü", "z"]
    assert batch.payloads == payloads
    assert batch.max_deliveries == [0, 1, 2, 3]
    assert batch.expires_at == [0, 0, 9, 0]


def test_batch_without_ids_asks_for_generated_ones() -> None:
    batch = decode_messages(encode_messages([5, 6], [b"p", b"q"]))
    assert batch.ids == ["", ""]
    assert batch.max_deliveries is None and batch.expires_at is None


def test_results_and_deliveries_round_trip() -> None:
    assert decode_results(encode_results([0, 1, 2], ["a", "bb", "ç"])) == (
        [0, 1, 2],
        ["a", "bb", "ç"],
    )
    sent = [LeasedMessage("i", 1, b"pp", 3, 1), LeasedMessage("j", 2, b"", 4, 2)]
    assert decode_deliveries(encode_deliveries(sent, 99)) == (sent, 99)


@pytest.mark.parametrize(
    "frame",
    [b"", b"\x00" * 3, b"\xff" * 64, encode_messages([1, 2], [b"a", b"b"], ["x", "y"])[:24]],
)
def test_garbage_frames_are_invalid_arguments(frame: bytes) -> None:
    with pytest.raises(InvalidArgument):
        decode_messages(frame)


def _batch_with_offsets(offsets: list[int], blob: bytes, count: int) -> bytes:
    b = flatbuffers.Builder(256)
    ts = b.CreateNumpyVector(np.arange(count, dtype=np.int64))
    off = b.CreateNumpyVector(np.asarray(offsets, dtype=np.uint32))
    data = b.CreateByteVector(blob)
    MessageBatch.Start(b)
    MessageBatch.AddTimestamps(b, ts)
    MessageBatch.AddPayloadOffsets(b, off)
    MessageBatch.AddPayloads(b, data)
    b.Finish(MessageBatch.End(b))
    return bytes(b.Output())


# A frame of a few hundred messages: one offset steps back in the middle.
LONG = [*range(50), 52, 51, *range(52, 301)]


@pytest.mark.parametrize(
    ("offsets", "count", "blob"),
    [
        ([0, 5, 99], 2, b"abcd"),
        ([0, 3, 2], 2, b"abcd"),
        ([1, 2, 4], 2, b"abcd"),
        ([0, 4], 2, b"abcd"),
        (LONG, len(LONG) - 1, b"x" * LONG[-1]),
    ],
    ids=["past-the-blob", "decreasing", "not-from-zero", "count-mismatch", "decreasing-long"],
)
def test_offsets_that_do_not_fit_the_blob_are_refused(
    offsets: list[int], count: int, blob: bytes
) -> None:
    with pytest.raises(InvalidArgument, match="offsets"):
        decode_messages(_batch_with_offsets(offsets, blob, count))


@settings(max_examples=200, deadline=None)
@given(
    messages=st.lists(
        st.tuples(st.text(max_size=30), st.binary(max_size=300), st.integers(-(2**63), 2**63 - 1)),
        max_size=40,
    ),
    options=st.integers(min_value=0, max_value=3),
)
def test_a_message_frame_is_never_larger_than_its_bound(
    messages: list[tuple[str, bytes, int]], options: int
) -> None:
    ids = [m[0].encode("utf-8", "replace").decode() for m in messages]
    payloads = [m[1] for m in messages]
    n = len(messages)
    columns = [[7] * n if k < options else None for k in range(3)]
    frame = encode_messages([m[2] for m in messages], payloads, ids, *columns)
    bound = messages_frame_at_most(n, sum(map(len, payloads)), sum(map(len, ids)), options)
    assert len(frame) <= bound
