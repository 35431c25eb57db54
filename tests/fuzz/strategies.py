"""Hypothesis strategies the fuzz stories share: batch frames (valid and
damaged) and request messages of the Timeline service.

Requests are drawn from the protobuf descriptors, so a field added to
proto/dejaq.proto is fuzzed without touching this file. A field's values mix
the plausible (the live topic's name, ids and versions that exist, the bounds
of every range the broker checks) with the arbitrary, so examples reach past
the first check as often as they fail it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import strategies as st

from dejaq.broker.api import validation
from dejaq.core.model import MAX_TIMESTAMP, LeasedMessage, State
from dejaq.core.wire.batches import encode_deliveries, encode_messages, encode_results

U32 = 2**32 - 1
U64 = 2**64 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1

texts = st.text(st.characters(codec="utf-8"), max_size=12)
payloads = st.binary(max_size=40)
i64 = st.integers(I64_MIN, I64_MAX)


@st.composite
def message_frames(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(0, 6))
    with_ids = draw(st.booleans())
    return encode_messages(
        draw(st.lists(timestamps, min_size=n, max_size=n)),
        draw(st.lists(payloads, min_size=n, max_size=n)),
        ids=draw(st.lists(texts, min_size=n, max_size=n)) if with_ids else None,
        max_deliveries=draw(st.none() | st.lists(st.integers(0, U32), min_size=n, max_size=n)),
        expires_at=draw(st.none() | st.lists(timestamps, min_size=n, max_size=n)),
    )


@st.composite
def result_frames(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(0, 6))
    return encode_results(
        draw(st.lists(st.integers(0, 255), min_size=n, max_size=n)),
        draw(st.lists(texts, min_size=n, max_size=n)),
    )


@st.composite
def delivery_frames(draw: st.DrawFn) -> bytes:
    leased = draw(
        st.lists(
            st.builds(
                LeasedMessage, texts, i64, payloads, st.integers(0, U64), st.integers(0, U32)
            ),
            max_size=6,
        )
    )
    return encode_deliveries(leased, draw(i64))


@st.composite
def damaged(draw: st.DrawFn, frames: st.SearchStrategy[bytes]) -> bytes:
    """A valid frame, truncated, with bytes overwritten, or spliced with noise."""
    frame = bytearray(draw(frames))
    how = draw(st.sampled_from(["truncate", "overwrite", "splice"]))
    if how == "truncate":
        return bytes(frame[: draw(st.integers(0, max(len(frame) - 1, 0)))])
    if how == "overwrite" and frame:
        for _ in range(draw(st.integers(1, 8))):
            frame[draw(st.integers(0, len(frame) - 1))] = draw(st.integers(0, 255))
        return bytes(frame)
    at = draw(st.integers(0, len(frame)))
    return bytes(frame[:at]) + draw(st.binary(min_size=1, max_size=16)) + bytes(frame[at:])


# -- request fields ------------------------------------------------------------

MAX_TS = MAX_TIMESTAMP
timestamps = st.sampled_from([0, 1, -1, MAX_TS, MAX_TS + 1, I64_MIN, I64_MAX]) | i64
durations = st.sampled_from(
    [
        0,
        validation.MIN_LEASE_MS - 1,
        validation.MIN_LEASE_MS,
        validation.MAX_LEASE_MS,
        validation.MAX_LEASE_MS + 1,
        MAX_TS,
        MAX_TS + 1,
        I64_MAX,
        I64_MAX + 1,
        U64,
    ]
) | st.integers(0, U64)
versions = st.integers(0, 4) | st.sampled_from([I64_MAX, I64_MAX + 1, U64]) | st.integers(0, U64)
counts = st.sampled_from([0, 1, 2, 100, 1000, 10_000, 10_001, U32]) | st.integers(0, U32)
long_text = st.sampled_from(["a" * 200, "a" * 201, "é" * 129, "x" * 257, "a\x00b", " ", "-a"])
junk_text = texts | long_text


@dataclass(frozen=True)
class Known:
    """What exists on the live broker, for requests that name real things."""

    topics: Sequence[str]  # topics that exist (and may be changed by the fuzzing)
    ids: Sequence[str]  # message ids in those topics
    consumers: Sequence[str]  # consumer ids connected now


def field_values(f: FieldDescriptor, known: Known) -> st.SearchStrategy[Any]:
    """Values for one (non-repeated) field, chosen by its name, then its type."""
    name = f.name
    if name in ("topic", "name"):
        return st.sampled_from(list(known.topics)) | junk_text
    if name in ("id", "ids", "after_id"):
        return st.sampled_from([*known.ids, ""]) | junk_text
    if name == "consumer_id":
        return st.sampled_from([*known.consumers, ""]) | junk_text
    if name == "states":
        return st.sampled_from([s.value for s in State]) | junk_text
    if name == "version" or name == "versions":
        return versions
    if name.endswith("_ms") and f.type == FieldDescriptor.TYPE_INT64:
        return timestamps
    if name.endswith("_ms") or name.endswith("_bytes"):
        return durations
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        return messages(f.message_type, known)
    if f.type == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([v.number for v in f.enum_type.values]) | st.integers(-1, 99)
    return _by_type(f)


def _by_type(f: FieldDescriptor) -> st.SearchStrategy[Any]:
    t = f.type
    if t == FieldDescriptor.TYPE_STRING:
        return junk_text
    if t == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if t == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if t in (FieldDescriptor.TYPE_UINT32, FieldDescriptor.TYPE_FIXED32):
        return counts
    if t in (FieldDescriptor.TYPE_UINT64, FieldDescriptor.TYPE_FIXED64):
        return st.integers(0, U64)
    if t in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32):
        return st.integers(-(2**31), 2**31 - 1)
    if t in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64):
        return i64
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.sampled_from([0.0, -1.0, 1e-9, 1e308]) | st.floats()  # NaN and inf too
    raise AssertionError(f"no strategy for field {f.full_name} of type {t}")


def _repeated(f: FieldDescriptor) -> bool:
    return bool(f.is_repeated)


@st.composite
def messages(draw: st.DrawFn, descriptor: Descriptor, known: Known) -> Message:
    """A protobuf message of ``descriptor`` with each field maybe set (most
    clients leave most fields at their default); of a oneof, the last member
    set wins, as on the wire."""
    msg = message_factory.GetMessageClass(descriptor)()
    for f in descriptor.fields:
        if not draw(st.booleans()):
            continue
        values = field_values(f, known)
        if _repeated(f):
            getattr(msg, f.name).extend(draw(st.lists(values, max_size=4)))
        elif f.type == FieldDescriptor.TYPE_MESSAGE:
            getattr(msg, f.name).CopyFrom(draw(values))
        else:
            setattr(msg, f.name, draw(values))
    return msg
