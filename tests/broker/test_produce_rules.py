"""A produce frame's fast check (a column at a time) and its message-by-message
screen read one list of rules: over random frames they always agree, on the
frame and on each of its messages."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from dejaq.broker.api import validation
from dejaq.broker.api.produce_rules import all_valid, screen
from dejaq.core.due_time import EARLIEST
from dejaq.core.model import KIND_PRIORITY, MAX_TIMESTAMP, Topic, TopicSettings
from dejaq.core.wire.batches import ProduceBatch
from tests.servers import in_ci

MAX_PAYLOAD = 8
AT = 1_900_000_000_000

# Values on both sides of every bound, and ordinary ones.
edges = st.sampled_from(
    [-1, 0, 1, EARLIEST - 1, EARLIEST, MAX_TIMESTAMP - 1, MAX_TIMESTAMP, MAX_TIMESTAMP + 1]
)
stamps = st.one_of(edges, st.integers(-(2**63), 2**63 - 1), st.integers(0, 2**41))
ids = st.one_of(
    st.text(alphabet="ab\x00", min_size=1, max_size=3),
    st.text(alphabet="a", min_size=60, max_size=70).map(lambda s: s * 4),  # ~256 bytes
    st.text(alphabet="é€😀a", min_size=60, max_size=70),  # 4 bytes or fewer a character
    st.text(min_size=1, max_size=8),
)
topics = st.builds(
    lambda priorities: Topic(
        "t",
        TopicSettings(max_payload_bytes=MAX_PAYLOAD)
        if priorities == 0
        else TopicSettings(
            max_payload_bytes=MAX_PAYLOAD, kind=KIND_PRIORITY, priorities=priorities
        ),
    ),
    st.sampled_from([0, 1, 3]),
)


@st.composite
def frames(draw: st.DrawFn) -> tuple[ProduceBatch, list[str]]:
    n = draw(st.integers(0, 6))
    column = st.lists(stamps, min_size=n, max_size=n)
    batch = ProduceBatch(
        timestamps=draw(column),
        ids=draw(st.lists(ids, min_size=n, max_size=n)),
        payloads=[b"x" * k for k in draw(st.lists(st.integers(0, 10), min_size=n, max_size=n))],
        expires_at=draw(st.none() | column),
        priorities=draw(st.none() | st.lists(st.integers(-2, 4), min_size=n, max_size=n)),
    )
    return batch, batch.ids


def one(batch: ProduceBatch, i: int) -> ProduceBatch:
    """Message ``i`` of ``batch`` alone."""
    return replace(
        batch,
        timestamps=batch.timestamps[i : i + 1],
        ids=batch.ids[i : i + 1],
        payloads=batch.payloads[i : i + 1],
        expires_at=None if batch.expires_at is None else batch.expires_at[i : i + 1],
        priorities=None if batch.priorities is None else batch.priorities[i : i + 1],
    )


@settings(max_examples=400, deadline=None, derandomize=in_ci(), database=None)
@given(frame=frames(), topic=topics)
def test_the_fast_check_and_the_screen_agree(
    frame: tuple[ProduceBatch, list[str]], topic: Topic
) -> None:
    # Given a random frame for a timeline or a priority topic
    batch, message_ids = frame
    # When both checks read it
    fast = all_valid(batch, message_ids, topic)
    positions, rejections = screen(batch, message_ids, topic)
    # Then the fast check passes exactly the frames the screen refuses nothing of
    assert fast == (not rejections)
    # and each message is accepted alone exactly when the screen accepts it
    assert sorted([*positions, *(r.index for r in rejections)]) == list(range(len(message_ids)))
    for i in range(len(message_ids)):
        alone = one(batch, i)
        assert all_valid(alone, alone.ids, topic) == (i in positions), i
    # and every refusal says why
    assert all(r.reason for r in rejections)


def test_the_screen_names_each_rule() -> None:
    # Given a timeline frame with one message breaking each rule, then a good one
    topic = Topic("t", TopicSettings(max_payload_bytes=MAX_PAYLOAD))
    batch = ProduceBatch(
        timestamps=[AT, -1, AT, AT, AT, AT],
        ids=["a\x00", "b", "c", "d", "e" * 300, "f"],
        payloads=[b"", b"", b"x" * (MAX_PAYLOAD + 1), b"", b"", b""],
        expires_at=[0, 0, 0, MAX_TIMESTAMP + 1, 0, 0],
        priorities=[0, 0, 0, 0, 0, 0],
    )
    # When it is screened
    positions, rejections = screen(batch, batch.ids, topic)
    # Then the good one passes and each other is refused by its rule
    assert positions == [5]
    assert [r.reason for r in rejections] == [
        "message id contains a NUL character",
        validation.timestamp_error(-1),
        f"payload of {MAX_PAYLOAD + 1} bytes is over the topic's {MAX_PAYLOAD}",
        f"expiry: {validation.timestamp_error(MAX_TIMESTAMP + 1)}",
        f"message id is longer than {validation.MAX_ID_BYTES} bytes",
    ]
    assert not all_valid(batch, batch.ids, topic)
    # and a priority on a timeline is refused, 0 is not
    with_priority = replace(batch, priorities=[0, 0, 0, 0, 0, 1])
    assert screen(with_priority, batch.ids, topic)[1][-1].reason == (
        "topic 't' is a timeline: it takes no priority"
    )


def test_a_time_in_seconds_is_refused_as_such() -> None:
    # Given a frame whose first time is epoch seconds, its second the same in ms
    topic = Topic("t", TopicSettings(max_payload_bytes=MAX_PAYLOAD))
    batch = ProduceBatch(
        timestamps=[1_795_000_000, 1_795_000_000_000], ids=["s", "ms"], payloads=[b"", b""]
    )
    # When it is screened
    positions, rejections = screen(batch, batch.ids, topic)
    # Then the seconds are refused, saying so, and the milliseconds pass
    assert positions == [1] and not all_valid(batch, batch.ids, topic)
    assert [r.reason for r in rejections] == [
        "timestamp 1795000000 is before 2001-09-09 (epoch ms 1000000000000):"
        " give epoch milliseconds, not seconds"
    ]
