"""The one-pass batch reading agrees with the generic one on every body it takes.

Given any body, JSON or not, shaped like a batch or not, when the one-pass
reading (``batch_json.read``) takes it, then the generic reading takes it too
and reads the same messages; a body it does not take is left to the generic
reading, which reads it or refuses it with its reason.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dejaq.broker.http import batch_json
from dejaq.broker.http.batch_json import NewMessages
from dejaq.broker.http.produce import read_messages
from dejaq.broker.http.route import parse_json
from dejaq.core.errors import InvalidArgument

LIMIT = 5
KEYS = [
    "id", "timestamp_ms", "delay_ms", "payload", "payload_base64", "key", "headers",
    *batch_json.OPTIONAL,
]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, -(2**63), -(2**63) - 1]),
    st.floats(allow_nan=False),
    st.sampled_from([7.0, -0.0, 1e3]),
    st.text(max_size=6),
    st.sampled_from(["\ud800", "AP8=", "AP8", "é", "not base64!"]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=2), max_leaves=4)
near_u32 = st.integers(min_value=-1, max_value=2**32)
well_formed = st.fixed_dictionaries(
    {"timestamp_ms": st.integers(min_value=-(2**63), max_value=2**63 - 1)},
    optional={
        "id": st.text(max_size=4),
        "payload": st.text(max_size=4),
        "payload_base64": st.binary(max_size=4).map(lambda b: base64.b64encode(b).decode()),
        "max_deliveries": near_u32,
        "expires_at_ms": st.integers(min_value=-(2**63), max_value=2**63),
        "priority": near_u32,
        "key": st.one_of(st.text(max_size=4), st.sampled_from(["", "k" * 257, "a\nb"])),
        "headers": st.dictionaries(
            st.sampled_from(["a", "B", "b", "bad name", "x-trace"]), st.text(max_size=3), max_size=3
        ),
    },
)
message = st.one_of(
    well_formed,
    well_formed,
    st.dictionaries(st.sampled_from(KEYS), values, max_size=5),
    st.fixed_dictionaries(
        {"timestamp_ms": st.integers(min_value=-(2**64), max_value=2**64)},
        optional={k: values for k in KEYS if k != "timestamp_ms"},
    ),
    st.fixed_dictionaries({"timestamp_ms": st.integers(), "extra": values}),
    values,
)
bodies = st.one_of(
    st.fixed_dictionaries({"messages": st.lists(well_formed, max_size=LIMIT)}),
    st.fixed_dictionaries({"messages": st.lists(message, max_size=LIMIT + 1)}),
    st.fixed_dictionaries({"messages": values}),
    st.dictionaries(st.sampled_from(["messages", "other"]), values, max_size=2),
    values,
)


def generic(raw: bytes) -> NewMessages | InvalidArgument:
    """What the generic reading makes of ``raw``: the messages, or its refusal."""
    try:
        doc = parse_json(raw)
        if not isinstance(doc, dict) or set(doc) != {"messages"}:
            raise InvalidArgument("the body must be an object with one key, messages (a list)")
        return read_messages(doc["messages"], LIMIT)
    except InvalidArgument as exc:
        return exc


def agree(raw: bytes) -> None:
    fast = batch_json.read(raw, LIMIT)
    if fast is not None:
        assert generic(raw) == fast


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_any_json_body_is_read_the_same_or_left_to_the_generic_reading(body: Any) -> None:
    agree(json.dumps(body).encode())


@settings(max_examples=200, deadline=None)
@given(raw=st.binary(max_size=64))
def test_any_bytes_are_read_the_same_or_left_to_the_generic_reading(raw: bytes) -> None:
    agree(raw)


def test_the_common_batch_and_one_with_options_are_read_in_one_pass() -> None:
    common = {"messages": [{"id": f"m{i}", "timestamp_ms": i, "payload": "é"} for i in range(3)]}
    options = {
        "messages": [
            {"timestamp_ms": 5, "payload_base64": base64.b64encode(b"\xff").decode()},
            {"id": "p", "timestamp_ms": 6, "priority": 3, "max_deliveries": 1},
            {"timestamp_ms": 7, "expires_at_ms": 9},
        ]
    }
    for body in (common, options):
        raw = json.dumps(body).encode()
        fast = batch_json.read(raw, LIMIT)
        assert fast is not None and fast == generic(raw)
    read = batch_json.read(json.dumps(options).encode(), LIMIT)
    assert read is not None
    assert read.payloads == [b"\xff", b"", b""]
    assert read.columns == {
        "max_deliveries": [0, 1, 0],
        "expires_at_ms": [0, 0, 9],
        "priority": [0, 3, 0],
    }


def test_duplicate_keys_and_a_refusal_read_as_the_generic_reading_reads_them() -> None:
    twice = b'{"messages": [{"timestamp_ms": 1, "timestamp_ms": 2, "id": "a", "id": "b"}]}'
    fast = batch_json.read(twice, LIMIT)
    assert fast is not None and fast == generic(twice)
    assert (fast.ids, fast.timestamps) == (["b"], [2])
    both = b'{"messages": [{"timestamp_ms": 1, "payload": "a", "payload_base64": "AP8="}]}'
    assert batch_json.read(both, LIMIT) is None
    assert "not both" in str(generic(both))
    over = json.dumps({"messages": [{"timestamp_ms": 1}] * (LIMIT + 1)}).encode()
    assert batch_json.read(over, LIMIT) is None
    assert "at most" in str(generic(over))
