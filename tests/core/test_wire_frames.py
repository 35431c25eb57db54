"""Frames cut by bytes: delivery frames and the cut points the driver uses."""

from __future__ import annotations

from dejaq.broker.api.validation import MAX_ID_BYTES
from dejaq.core.model import LeasedMessage
from dejaq.core.wire.batches import decode_deliveries, delivery_frames, encode_messages
from dejaq.core.wire.frames import (
    FRAME_OVERHEAD_BYTES,
    MAX_FRAME_BYTES,
    MESSAGE_OVERHEAD_BYTES,
    cuts,
    frame_bytes,
)


def _leased(sizes: list[int]) -> list[LeasedMessage]:
    return [
        LeasedMessage("i" * MAX_ID_BYTES, 1000 + n, b"p" * s, 2, 1) for n, s in enumerate(sizes)
    ]


def test_the_allowance_covers_the_longest_id_and_every_column() -> None:
    # Given messages with the longest id, their frame is no larger than its bound.
    messages = _leased([0] * 100 + [5000] * 100)
    ((frame, _),) = delivery_frames(messages, 7, MAX_FRAME_BYTES)
    assert len(frame) <= frame_bytes(len(messages), 100 * 5000)
    produced = encode_messages([1] * 200, [m.payload for m in messages], [m.id for m in messages])
    assert len(produced) <= frame_bytes(200, 100 * 5000)
    assert MESSAGE_OVERHEAD_BYTES >= MAX_ID_BYTES + 8 + 8 + 4 + 8 + 4 + 4


def test_small_deliveries_stay_one_frame() -> None:
    messages = _leased([100] * 1000)
    frames = delivery_frames(messages, 99, 4 << 20)
    assert len(frames) == 1
    assert decode_deliveries(frames[0][0]) == (messages, 99)


def test_large_deliveries_are_cut_by_bytes_in_order() -> None:
    # Given 100 deliveries of 900 KB and a cap of 4 MiB,
    messages = _leased([900_000] * 100)
    frames = delivery_frames(messages, 5, 4 << 20)
    # then every frame is under the cap, and together they carry all, in order.
    assert len(frames) > 1
    assert all(len(frame) <= 4 << 20 for frame, _ in frames)
    got = [m for frame, _ in frames for m in decode_deliveries(frame)[0]]
    assert got == messages
    assert [m for _, carries in frames for m in carries] == messages


def test_a_message_larger_than_the_cap_goes_alone() -> None:
    messages = _leased([10, 3 << 20, 10])
    frames = delivery_frames(messages, 5, 1 << 20)
    assert [len(carries) for _, carries in frames] == [1, 1, 1]
    assert [m for f, _ in frames for m in decode_deliveries(f)[0]] == messages


def test_cuts_respect_count_and_bytes_and_take_at_least_one() -> None:
    room = 10_000
    per = room - FRAME_OVERHEAD_BYTES - MESSAGE_OVERHEAD_BYTES  # one such message fills a frame
    assert cuts([1] * 10, 4, 1 << 20) == [4, 8, 10]
    assert cuts([per, per, 1, 1], 100, room) == [1, 2, 4]
    assert cuts([room * 3], 100, room) == [1]
    assert cuts([], 10, room) == []
