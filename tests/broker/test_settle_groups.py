"""Which Settle frames go to storage together (``broker/api/settle_groups.py``)."""

from __future__ import annotations

import pytest

from dejaq.broker.api.settle import Kind
from dejaq.broker.api.settle_groups import MAX_GROUP_IDS, Frame, groups, parse
from dejaq.core.errors import InvalidArgument
from dejaq.proto import dejaq_pb2 as pb


def frame(token: int, *ids: str, kind: Kind = Kind.ACK, ms: int = 0) -> Frame:
    return Frame(token, kind, ms, [(id, 1) for id in ids])


def tokens(found: list[list[Frame]]) -> list[list[int]]:
    return [[f.token for f in group] for group in found]


def test_consecutive_frames_of_one_kind_and_delay_go_together_in_order() -> None:
    frames = [
        frame(1, "a"),
        frame(2, "b", "c"),
        frame(3, "d", kind=Kind.NACK, ms=100),
        frame(4, "e", kind=Kind.NACK, ms=100),
        frame(5, "f", kind=Kind.NACK, ms=200),
        frame(6, "g"),
    ]
    assert tokens(groups(frames)) == [[1, 2], [3, 4], [5], [6]]


def test_an_id_settled_again_starts_a_new_group() -> None:
    # Given an extend and a second extend of the same id (the second must see the first)
    frames = [frame(1, "a", kind=Kind.EXTEND), frame(2, "b", "a", kind=Kind.EXTEND)]
    assert tokens(groups(frames)) == [[1], [2]]


def test_a_group_holds_a_bounded_number_of_ids() -> None:
    big = [f"m{i}" for i in range(MAX_GROUP_IDS)]
    assert tokens(groups([frame(1, *big), frame(2, "x")])) == [[1], [2]]


def test_a_malformed_frame_is_refused_by_name() -> None:
    with pytest.raises(InvalidArgument, match="one version per id"):
        parse(pb.Settle(kind=pb.Settle.ACK, ids=["a"], versions=[]))
    with pytest.raises(InvalidArgument, match="unknown settle kind"):
        parse(pb.Settle(kind=99, ids=["a"], versions=[1]))  # type: ignore[arg-type]
