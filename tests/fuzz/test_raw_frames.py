"""Raw frames on a live broker: random bytes as the FlatBuffers batch of a
valid Produce envelope, and random or damaged protobuf bytes sent on every
method through generic gRPC calls (no stubs). The broker answers each with a
clear status, keeps serving (``keeps_serving``), and a refused call changes
nothing. Bytes that are not the method's request type get INVALID_ARGUMENT
(gRPC's own parsing answered UNKNOWN before ``dejaq.broker.api.requests``)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dejaq.proto import dejaq_pb2 as pb
from tests.fuzz.budget import examples
from tests.fuzz.live import CALL_TIMEOUT_S, CLEAR, Code, LiveBroker
from tests.fuzz.strategies import damaged, messages

SERVICE = pb.DESCRIPTOR.services_by_name["Timeline"]
METHODS = [m.name for m in SERVICE.methods]


@st.composite
def raw_requests(draw: st.DrawFn, method: str, live: LiveBroker) -> bytes:
    """Random bytes, or a request of the method's type serialized and damaged."""
    desc = SERVICE.methods_by_name[method].input_type
    valid = messages(desc, live.known(live.aim(method))).map(lambda m: m.SerializeToString())
    return draw(st.binary(max_size=64) | damaged(valid) | valid)


def call_raw(live: LiveBroker, method: str, frames: list[bytes]) -> tuple[grpc.StatusCode, str]:
    """Send ``frames`` as they are; the status the call ends with."""
    path = f"/{SERVICE.full_name}/{method}"
    m = SERVICE.methods_by_name[method]
    try:
        if m.client_streaming:
            answers: Iterator[bytes] = live.channel.stream_stream(path)(
                iter(frames), timeout=CALL_TIMEOUT_S
            )
            for _ in answers:
                pass
        else:
            live.channel.unary_unary(path)(frames[0], timeout=CALL_TIMEOUT_S)
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""
    return Code.OK, ""


@pytest.mark.parametrize("method", METHODS)
@settings(max_examples=examples(18))
@given(data=st.data())
def test_raw_protobuf_bytes_get_a_clear_status_and_change_nothing_when_refused(
    live: LiveBroker, method: str, data: st.DataObject
) -> None:
    streaming = SERVICE.methods_by_name[method].client_streaming
    frames = data.draw(
        st.lists(raw_requests(method, live), min_size=1, max_size=3 if streaming else 1)
    )
    before = live.snapshot(live.unary_topic)
    code, detail = call_raw(live, method, frames)
    assert code in CLEAR, f"{method} answered {code.name}: {detail}"
    if code != Code.OK and method != "Consume":  # a Consume may lease before it is refused
        assert live.snapshot(live.unary_topic) == before, f"refused raw {method} changed the topic"


@settings(max_examples=examples(80))
@given(batches=st.lists(st.binary(max_size=256), min_size=1, max_size=4))
def test_random_bytes_as_a_produce_batch_are_refused_and_store_nothing(
    live: LiveBroker, batches: list[bytes]
) -> None:
    # Given valid Produce envelopes around random FlatBuffers bytes
    frames = [pb.ProduceRequest(topic=live.produce_topic, batch=b) for b in batches]
    before = live.snapshot(live.produce_topic)
    answered = 0
    code = Code.OK
    try:
        for answer in live.stub.Produce(iter(frames), timeout=CALL_TIMEOUT_S):
            answered += 1
            assert not answer.rejections or all(r.reason for r in answer.rejections)
    except grpc.RpcError as exc:
        code = exc.code()
        assert code == Code.INVALID_ARGUMENT, f"{code.name}: {exc.details()}"
    # Then a frame that decodes stands (it may hold messages), the rest is refused
    if answered == 0:
        assert code == Code.INVALID_ARGUMENT
        assert live.snapshot(live.produce_topic) == before
