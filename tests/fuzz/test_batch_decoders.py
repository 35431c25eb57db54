"""The FlatBuffers batch decoders against arbitrary bytes: every frame either
decodes or raises ``InvalidArgument``; nothing else escapes, nothing hangs.

Valid frames are built by the encoders, then truncated, mutated byte by byte
or spliced, so the fuzzing reaches deep into the tables rather than failing on
the root offset."""

from __future__ import annotations

from collections.abc import Callable

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
)

Decoder = Callable[[bytes], object]
DECODERS: list[Decoder] = [decode_messages, decode_results, decode_deliveries]
EXAMPLES = 300

ids = st.text(st.characters(codec="utf-8"), max_size=12)
payloads = st.binary(max_size=40)
i64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def message_frames(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(0, 6))
    with_ids = draw(st.booleans())
    return encode_messages(
        draw(st.lists(i64, min_size=n, max_size=n)),
        draw(st.lists(payloads, min_size=n, max_size=n)),
        ids=draw(st.lists(ids, min_size=n, max_size=n)) if with_ids else None,
        max_deliveries=draw(
            st.none() | st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n)
        ),
        expires_at=draw(st.none() | st.lists(i64, min_size=n, max_size=n)),
    )


@st.composite
def result_frames(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(0, 6))
    return encode_results(
        draw(st.lists(st.integers(0, 255), min_size=n, max_size=n)),
        draw(st.lists(ids, min_size=n, max_size=n)),
    )


@st.composite
def delivery_frames(draw: st.DrawFn) -> bytes:
    leased = draw(
        st.lists(
            st.builds(
                LeasedMessage,
                ids,
                i64,
                payloads,
                st.integers(0, 2**64 - 1),
                st.integers(0, 2**32 - 1),
            ),
            max_size=6,
        )
    )
    return encode_deliveries(leased, draw(i64))


valid_frames = message_frames() | result_frames() | delivery_frames()


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    """A valid frame, truncated, with bytes overwritten, or spliced with noise."""
    frame = bytearray(draw(valid_frames))
    how = draw(st.sampled_from(["truncate", "overwrite", "splice"]))
    if how == "truncate":
        return bytes(frame[: draw(st.integers(0, max(len(frame) - 1, 0)))])
    if how == "overwrite" and frame:
        for _ in range(draw(st.integers(1, 8))):
            frame[draw(st.integers(0, len(frame) - 1))] = draw(st.integers(0, 255))
        return bytes(frame)
    at = draw(st.integers(0, len(frame)))
    return bytes(frame[:at]) + draw(st.binary(min_size=1, max_size=16)) + bytes(frame[at:])


def decodes_or_refuses(decode: Decoder, frame: bytes) -> None:
    try:
        decode(frame)
    except InvalidArgument as exc:
        assert str(exc), "a refusal must say why"


@settings(max_examples=EXAMPLES)
@given(frame=st.binary(max_size=256), decode=st.sampled_from(DECODERS))
def test_arbitrary_bytes_decode_or_are_refused(frame: bytes, decode: Decoder) -> None:
    decodes_or_refuses(decode, frame)


@settings(max_examples=EXAMPLES)
@given(frame=damaged(), decode=st.sampled_from(DECODERS))
def test_damaged_frames_decode_or_are_refused(frame: bytes, decode: Decoder) -> None:
    decodes_or_refuses(decode, frame)


@settings(max_examples=EXAMPLES // 3)
@given(frame=valid_frames)
def test_every_decoder_takes_any_valid_frame_or_refuses_it(frame: bytes) -> None:
    # A frame of one table read as another is the likeliest mix-up on the wire.
    for decode in DECODERS:
        decodes_or_refuses(decode, frame)
