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
from dejaq.core.wire.batches import decode_deliveries, decode_messages, decode_results
from tests.fuzz.budget import examples
from tests.fuzz.strategies import damaged, delivery_frames, message_frames, result_frames

Decoder = Callable[[bytes], object]
DECODERS: list[Decoder] = [decode_messages, decode_results, decode_deliveries]
EXAMPLES = 300

valid_frames = message_frames() | result_frames() | delivery_frames()


def decodes_or_refuses(decode: Decoder, frame: bytes) -> None:
    try:
        decode(frame)
    except InvalidArgument as exc:
        assert str(exc), "a refusal must say why"


@settings(max_examples=examples(EXAMPLES))
@given(frame=st.binary(max_size=256), decode=st.sampled_from(DECODERS))
def test_arbitrary_bytes_decode_or_are_refused(frame: bytes, decode: Decoder) -> None:
    decodes_or_refuses(decode, frame)


@settings(max_examples=examples(EXAMPLES))
@given(frame=damaged(valid_frames), decode=st.sampled_from(DECODERS))
def test_damaged_frames_decode_or_are_refused(frame: bytes, decode: Decoder) -> None:
    decodes_or_refuses(decode, frame)


@settings(max_examples=examples(EXAMPLES // 3))
@given(frame=valid_frames)
def test_every_decoder_takes_any_valid_frame_or_refuses_it(frame: bytes) -> None:
    # A frame of one table read as another is the likeliest mix-up on the wire.
    for decode in DECODERS:
        decodes_or_refuses(decode, frame)
