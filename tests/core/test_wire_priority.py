"""The wire carries priorities: per produced message, per delivery, in topic
settings and messages; users never see a rank."""

from __future__ import annotations

import dataclasses

import pytest

from dejaq.core import priority
from dejaq.core.errors import InvalidArgument
from dejaq.core.model import KIND_PRIORITY, LeasedMessage, Message, Topic, TopicSettings
from dejaq.core.wire.batches import (
    decode_deliveries,
    decode_delivery_columns,
    decode_messages,
    delivery_frames,
    encode_deliveries,
    encode_messages,
)
from dejaq.core.wire.convert import message_to_pb, settings_from_pb, settings_to_pb
from dejaq.proto import dejaq_pb2 as pb

CREATED = 1_800_000_000_000
TOPIC = Topic("jobs", TopicSettings(kind=KIND_PRIORITY, priorities=10, aging_ms=0), CREATED)


def test_produce_batches_carry_priorities_and_old_batches_read_as_none() -> None:
    given = decode_messages(encode_messages([0, 5], [b"a", b"b"], ["x", "y"], priorities=[3, 0]))
    assert given.priorities == [3, 0]
    assert decode_messages(encode_messages([0], [b"a"], ["x"])).priorities is None


def test_a_negative_priority_is_refused_before_sending() -> None:
    with pytest.raises(InvalidArgument):
        encode_messages([0], [b"a"], ["x"], priorities=[-1])


def test_deliveries_of_a_priority_topic_show_when_available_and_the_priority() -> None:
    # Given a ranked delivery (available since CREATED + 7) and a plain one
    ranked = priority.rank(TOPIC, 4, CREATED + 7)
    leased = [
        LeasedMessage("a", ranked, b"p", 2, 1, 4),
        LeasedMessage("b", CREATED + 9, b"q", 3, 2, 1),
    ]
    # When they are encoded for a priority topic
    out, until = decode_deliveries(encode_deliveries(leased, CREATED + 100, TOPIC))
    # Then the consumer sees times >= 0 and the priorities
    assert [(d.id, d.timestamp, d.priority) for d in out] == [
        ("a", CREATED + 7, 4),
        ("b", CREATED + 9, 1),
    ]
    assert until == CREATED + 100


def test_timeline_deliveries_carry_no_priority_column() -> None:
    leased = [LeasedMessage("a", CREATED, b"p", 2, 1)]
    ((frame, _),) = delivery_frames(leased, CREATED + 5, 1 << 20)
    assert decode_delivery_columns(frame).priorities is None
    assert decode_deliveries(frame)[0][0].priority == 0


def test_settings_round_trip_kind_priorities_and_aging() -> None:
    s = TopicSettings(kind=KIND_PRIORITY, priorities=7, aging_ms=60_000)
    assert settings_from_pb(settings_to_pb(s)) == s


def test_an_empty_kind_is_a_timeline_and_zero_priorities_the_default() -> None:
    assert settings_from_pb(pb.TopicSettings()).kind == "timeline"
    s = settings_from_pb(pb.TopicSettings(kind="priority"))
    assert s.priorities == priority.DEFAULT_PRIORITIES


def test_a_ranked_message_shows_when_it_became_available() -> None:
    m = Message("a", priority.rank(TOPIC, 2, CREATED + 50), b"", 1, 0, None, 0, priority=2)
    p = message_to_pb(TOPIC, m, CREATED + 60)
    assert (p.timestamp_ms, p.priority, p.state) == (CREATED + 50, 2, "due")
    waiting = dataclasses.replace(m, timestamp=CREATED + 500)
    assert message_to_pb(TOPIC, waiting, CREATED + 60).timestamp_ms == CREATED + 500
