"""Every RPC of the Timeline service, its fields drawn by Hypothesis, on a live
broker (memory:// and SQLite): the status is one a client can act on (never
UNKNOWN or INTERNAL), a refused call changes nothing, and the heartbeat client
on another topic keeps being served (``keeps_serving`` in conftest)."""

from __future__ import annotations

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dejaq.core.model import InsertStatus
from dejaq.core.wire.batches import decode_results
from dejaq.proto import dejaq_pb2 as pb
from tests.fuzz.budget import examples
from tests.fuzz.live import CALL_TIMEOUT_S, CLEAR, Code, LiveBroker
from tests.fuzz.strategies import damaged, message_frames, messages

SERVICE = pb.DESCRIPTOR.services_by_name["Timeline"]
UNARY = [m.name for m in SERVICE.methods if not m.client_streaming]


@pytest.mark.parametrize("method", UNARY)
@settings(max_examples=examples(30))
@given(data=st.data())
def test_unary_call_gets_a_clear_status_and_a_refusal_changes_nothing(
    live: LiveBroker, method: str, data: st.DataObject
) -> None:
    # Given the topic the call aims at, as stored
    known = live.known(live.aim(method))
    request = data.draw(messages(SERVICE.methods_by_name[method].input_type, known))
    before = live.snapshot(live.unary_topic)
    # When the call is made
    code, detail = live.call(method, request)
    # Then its status is a clear one, and if refused, nothing changed
    assert code in CLEAR, f"{method} answered {code.name}: {detail}"
    if code != Code.OK:
        assert detail, f"{method} refused with {code.name} and no reason"
        assert live.snapshot(live.unary_topic) == before, f"refused {method} changed the topic"


produce_batches = message_frames() | damaged(message_frames()) | st.binary(max_size=128)


@settings(max_examples=examples(60))
@given(data=st.data())
def test_produce_frames_get_a_clear_status_and_store_only_what_was_accepted(
    live: LiveBroker, data: st.DataObject
) -> None:
    # Given a few Produce frames for the topic, another, or none at all, each
    # keeping, replacing or extending the waiting messages of its ids
    topics = st.sampled_from(list(live.known(live.produce_topic).topics))
    frames = data.draw(
        st.lists(
            st.builds(
                pb.ProduceRequest,
                topic=topics | st.text(max_size=8),
                batch=produce_batches,
                on_duplicate=st.integers(0, 3),  # 3: a mode the wire lacks
            ),
            min_size=1,
            max_size=3,
        )
    )
    before = live.snapshot(live.produce_topic)
    # When they are sent on one stream
    answers: list[pb.ProduceResponse] = []
    code = Code.OK
    try:
        answers.extend(live.stub.Produce(iter(frames), timeout=CALL_TIMEOUT_S))
    except grpc.RpcError as exc:
        code = exc.code()
        assert code in CLEAR, f"Produce answered {code.name}: {exc.details()}"
    # Then every refusal inside a frame carries a clear code, and the topic
    # grew by exactly the messages answered ACCEPTED for it
    accepted = 0
    for frame, answer in zip(frames, answers, strict=False):
        status, _ = decode_results(answer.results)
        if frame.topic == live.produce_topic:  # a junk name may be a topic fuzzing created
            accepted += status.count(InsertStatus.ACCEPTED)
        for r in answer.rejections:
            assert grpc_code(r.code) in CLEAR - {Code.OK}, r
            assert status[r.index] == InsertStatus.REJECTED and r.reason
    after = live.snapshot(live.produce_topic)
    assert len(after[1]) == len(before[1]) + accepted, (code, answers)
    assert len(answers) == len(frames) or code != Code.OK


def grpc_code(number: int) -> grpc.StatusCode:
    return next(c for c in grpc.StatusCode if c.value[0] == number)


@settings(max_examples=examples(60))
@given(data=st.data())
def test_consume_streams_get_a_clear_status_and_a_refused_hello_changes_nothing(
    live: LiveBroker, data: st.DataObject
) -> None:
    # Given a Consume stream of fuzzed frames, most opening with a Hello
    known = live.known(live.consume_topic)
    any_frame = messages(pb.ConsumeRequest.DESCRIPTOR, known)
    hellos = messages(pb.Hello.DESCRIPTOR, known).map(lambda h: pb.ConsumeRequest(hello=h))
    first = data.draw(hellos | any_frame)
    rest = data.draw(st.lists(any_frame, max_size=3))
    if data.draw(st.booleans()):
        rest.append(pb.ConsumeRequest(goodbye=pb.Goodbye()))
    before = live.snapshot(live.consume_topic)
    # When it is sent, half-closed, and read to its end
    responses: list[pb.ConsumeResponse] = []
    code = Code.OK
    try:
        responses.extend(live.stub.Consume(iter([first, *rest]), timeout=CALL_TIMEOUT_S))
    except grpc.RpcError as exc:
        code = exc.code()
        assert code in CLEAR, f"Consume answered {code.name}: {exc.details()}"
    # Then each settle refusal carries a clear code, and a stream refused
    # before its Welcome left the topic as it was
    for r in responses:
        if r.HasField("settled"):
            for rejection in r.settled.rejections:
                assert grpc_code(rejection.code) in CLEAR - {Code.OK}, rejection
    if not any(r.HasField("welcome") for r in responses):
        assert code != Code.OK, "a stream that was not welcomed must end with a refusal"
        assert live.snapshot(live.consume_topic) == before
